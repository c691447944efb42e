#!/usr/bin/env bash
# Runs every fuzz target of the repository (each `func Fuzz*` in a
# *_test.go file, in every module) for real: `go test -fuzz` for FUZZTIME
# each (default 1m), one target at a time since go test fuzzes one target a
# package run. TESTREPORT, when set, is a command (hack/testreport) that
# reads the `go test -json` output: it lists skips and, in CI, fails on one
# that is not allowed.
#
# A failure leaves its input in the package's testdata/fuzz/<target>/;
# `go test -run <target>/<file>` in that package replays it, and committing
# the file keeps it as a regression case. The exit status is 1 when any
# target failed; every target runs regardless.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${FUZZTIME:-1m}

# module directory of a file: the nearest parent holding a go.mod
module_of() {
	local d
	d=$(dirname "$1")
	while [ ! -f "$d/go.mod" ]; do d=$(dirname "$d"); done
	echo "$d"
}

targets=()
while IFS= read -r file; do
	mod=$(module_of "$file")
	pkg=./$(dirname "${file#"$mod"/}")
	for fn in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
		targets+=("$mod $pkg $fn")
	done
done < <(grep -rl --include='*_test.go' --exclude-dir=.git --exclude-dir=.cache --exclude-dir=bin '^func Fuzz' . | sort)

if [ ${#targets[@]} -eq 0 ]; then
	echo "fuzz: no fuzz targets found" >&2
	exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${fuzztime} each"

failed=()
for t in "${targets[@]}"; do
	read -r mod pkg fn <<<"$t"
	echo "fuzz: $fn in $pkg (module $mod) for $fuzztime"
	if [ -n "${TESTREPORT:-}" ]; then
		run() { (cd "$mod" && go test -json -run '^$' -fuzz "^$fn\$" -fuzztime "$fuzztime" "$pkg" 2>&1) | $TESTREPORT; }
	else
		run() { (cd "$mod" && go test -run '^$' -fuzz "^$fn\$" -fuzztime "$fuzztime" "$pkg"); }
	fi
	run || failed+=("$fn ($pkg)")
done

if [ ${#failed[@]} -gt 0 ]; then
	printf 'fuzz: FAIL %s\n' "${failed[@]}" >&2
	exit 1
fi
echo "fuzz: all ${#targets[@]} targets passed"
