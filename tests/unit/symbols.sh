#!/bin/sh
# symbols.sh - libmkernel.so exports the mk* API and nothing else, and
# every exported function is declared in mkernel.h.
lib=${top_builddir:-.}/.libs/libmkernel.so
hdr=${top_srcdir:-.}/include/mkernel.h
[ -f "$lib" ] || { echo "SKIP: $lib not built"; exit 77; }
command -v nm >/dev/null || { echo "SKIP: no nm"; exit 77; }
fail=0
for s in $(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBR]$/ {print $3}'); do
    case $s in
    mk[A-Z]*) grep -q "\b$s\b" "$hdr" || { echo "FAIL: $s is exported but not in mkernel.h"; fail=1; } ;;
    _init|_fini|_edata|_end|__bss_start) ;;
    *) echo "FAIL: libmkernel.so exports internal symbol $s"; fail=1 ;;
    esac
done
for f in $(grep -oE '\bmk[A-Z][A-Za-z0-9]*[[:space:]]*\(' "$hdr" | tr -d ' (' | sort -u); do
    nm -D --defined-only "$lib" | grep -q " T $f\$" || { echo "FAIL: $f is declared but not exported"; fail=1; }
done
[ $fail = 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $fail
