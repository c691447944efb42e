#!/usr/bin/env bash
# goinstall.sh WHAT [go install flags and packages...]
#
# `go install -v` that says what it is doing: on a cold cache, building
# Kubernetes takes half an hour, and go itself prints nothing but module
# downloads. Every 15 seconds (and when a step starts) one line says how
# many packages are compiled out of how many the targets need; compiler
# errors pass through unchanged. On a warm cache it prints nothing.
set -uo pipefail
what=$1
shift
# The packages are the arguments that are neither flags nor flag values.
pkgs=()
value=
for arg in "$@"; do
	if [ -n "$value" ]; then
		value=
		continue
	fi
	case $arg in
	-ldflags | -gcflags | -asmflags | -tags | -mod | -p | -pkgdir | -toolexec | -overlay) value=1 ;;
	-*) ;;
	*) pkgs+=("$arg") ;;
	esac
done

filter() {
	local downloads=0 compiled=0 last=$SECONDS line
	while IFS= read -r line; do
		case $line in
		"go: downloading "*)
			downloads=$((downloads + 1))
			if [ "$downloads" = 1 ] || [ $((SECONDS - last)) -ge 15 ]; then
				echo "$what: downloading Go modules ($downloads so far, ${line#go: downloading })"
				last=$SECONDS
			fi
			;;
		*[[:space:]:]* | "") echo "$line" ;;
		*)
			compiled=$((compiled + 1))
			if [ "$compiled" = 1 ] || [ $((SECONDS - last)) -ge 15 ]; then
				echo "$what: compiled $compiled of at most $total packages (${line})"
				last=$SECONDS
			fi
			;;
		esac
	done
	if [ "$compiled" -gt 0 ]; then echo "$what: compiled $compiled packages in ${SECONDS}s"; fi
}

total=?
# Listing the targets downloads the modules they need (reported), and tells
# how many packages a cold build compiles.
total=$( { go list -deps "${pkgs[@]}" 2> >(filter >&2); } | wc -l)
go install -v "$@" 2>&1 | filter
exit "${PIPESTATUS[0]}"
