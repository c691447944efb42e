module github.com/cilium-go/cilium

go 1.26.0
