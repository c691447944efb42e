package kubernetes

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestArgs(t *testing.T) {
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	fields := map[string]string{"spec.nodeName": "n1"}
	for _, tc := range []struct {
		name    string
		env     []corev1.EnvVar
		args    []string
		want    []string
		wantErr string
	}{
		{"values and fields", []corev1.EnvVar{{Name: "A", Value: "x"}, field("NODE", "spec.nodeName")},
			[]string{"--a=$(A)", "--node=$(NODE)-$(A)", "plain"}, []string{"--a=x", "--node=n1-x", "plain"}, ""},
		{"undefined variable", nil, []string{"--a=$(A)"}, nil, "$(A) is no env variable"},
		{"field without a value", []corev1.EnvVar{field("IP", "status.podIP")}, []string{"--ip=$(IP)"}, nil, "no value for status.podIP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Args(&corev1.Container{Name: "c", Env: tc.env, Args: tc.args}, fields)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("Args = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
