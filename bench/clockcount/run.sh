#!/bin/sh
# Counts the clock reads of one proxied chat call, by caller, through the
# gateway and through fasthttp's relay (proxy/clockcount_test.go): the test is
# built with a runtime whose time.Now and time.Since/Until note their callers
# and whose nanotime counts every monotonic reading (an -overlay of three files
# of $GOROOT/src/runtime; the first build rebuilds the standard library, some
# minutes). Run from the repository's root: sh bench/clockcount/run.sh
set -e
root=$(go env GOROOT)/src/runtime
dir=$(mktemp -d)
here=$(dirname "$0")
sed 's/^func time_runtimeNow() (sec int64, nsec int32, mono int64) {$/&\n\tclockNote(sys.GetCallerPC(), 0)/; s/^func time_runtimeNano() int64 {$/&\n\tclockNote(sys.GetCallerPC(), 1)/' \
	"$root/time.go" >"$dir/time.go"
sed 's/^import "unsafe"$/import (\n\t"internal\/runtime\/atomic"\n\t"unsafe"\n)/; s/^\treturn nanotime1()$/\tatomic.Xadd64(\&clockNano, 1)\n&/' \
	"$root/time_nofake.go" >"$dir/time_nofake.go"
cp "$here/clockcount.go.in" "$dir/clockcount.go"
cat >"$dir/overlay.json" <<JSON
{"Replace":{"$root/time.go":"$dir/time.go","$root/time_nofake.go":"$dir/time_nofake.go","$root/clockcount.go":"$dir/clockcount.go"}}
JSON
go test -overlay "$dir/overlay.json" -tags clockcount -count=1 -v -run TestClockCount ./proxy/ | grep -v '^=== RUN\|^---'
