package ui

import (
	"embed"
	"io/fs"
)

// The page as `make ui` builds it from ui/ (esbuild): committed, so that
// building cilium-go needs no Node.js, and checked fresh by CI.
//
//go:embed dist
var dist embed.FS

// Assets is the built page: index.html and what it loads.
func Assets() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // "dist" is embedded above; failing is a programming error
	}
	return sub
}
