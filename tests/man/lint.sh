#!/bin/sh
# lint.sh - checks of the man pages under man/:
#   (a) every page is clean under `mandoc -Tlint -W warning`;
#   (b) every function declared in include/mkernel.h has man/man3/<name>.3,
#       and that page (or the page it sources) names it under NAME and
#       gives its Fortran interface (a "Fortran" subsection of SYNOPSIS
#       naming the function);
#   (c) every MK_* parameter of src/core/params.def is listed in
#       man/man7/mkernel-env.7, with its default.
# Pages that are only a `.so man3/<page>.3` link are not given to mandoc:
# mandoc warns ".so is fragile, better use ln(1)" for every .so request, and
# that warning cannot be fixed short of replacing the .so pages (which
# man-db and mandoc both follow) by file-system links made at install time.
# Instead, for a link page the target must exist and be a real page; the
# target itself is linted like every other page.
# Without mandoc, (a) is skipped: the test exits 77 (skipped) unless (b) or
# (c) failed.  Runs from any directory: pages are found under $top_srcdir.

here=$(cd "$(dirname "$0")/../.." && pwd)
srcdir=${top_srcdir:-$here}
man=$srcdir/man
hdr=$srcdir/include/mkernel.h
params=$srcdir/src/core/params.def
env7=$man/man7/mkernel-env.7
passed=0
failed=0
skip_reason=

pass() { passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

for f in "$hdr" "$params"; do
    [ -f "$f" ] || { echo "FAIL: $f not found (top_srcdir=$srcdir)"; exit 1; }
done

MANDOC=${MANDOC:-$(command -v mandoc 2>/dev/null)}
if [ -z "$MANDOC" ] || ! command -v "$MANDOC" >/dev/null 2>&1; then
    skip_reason="mandoc is not installed (configure found none); page lint skipped"
    MANDOC=
fi

# The target of a page that is only a .so link ("" for a real page).
so_target() {
    sed -e '/^\.\\"/d' -e '/^[[:space:]]*$/d' "$1" | awk '
        NR == 1 && $1 == ".so" && NF == 2 { t = $2; next }
        { t = ""; exit }
        END { print t }'
}

# ---- (a) mandoc -Tlint on every page ----------------------------------
pages=$(find "$man" -type f -name '*.[1-9]' | LC_ALL=C sort)
[ -n "$pages" ] || fail "no man pages found under $man"
for p in $pages; do
    rel=${p#"$man"/}
    t=$(so_target "$p")
    if [ -n "$t" ]; then
        if [ ! -f "$man/$t" ]; then
            fail "$rel: .so target $t does not exist"
        elif [ -n "$(so_target "$man/$t")" ]; then
            fail "$rel: .so target $t is itself a link"
        else
            pass
        fi
        continue
    fi
    [ -n "$MANDOC" ] || continue
    out=$(cd "$man" && "$MANDOC" -Tlint -W warning "$rel" 2>&1)
    rc=$?
    if [ $rc -ne 0 ] || [ -n "$out" ]; then
        fail "$rel: mandoc -Tlint -W warning (exit $rc):"
        printf '%s\n' "$out" | sed 's/^/    /'
    else
        pass
    fi
done

# ---- (b) one man3 page per public function -----------------------------
# Comments are stripped first so that prose such as "see mkFoo()" in a
# comment does not count as a declaration.
funcs=$(awk '
    { line = $0; out = ""
      while (line != "") {
          if (incom) {
              i = index(line, "*/")
              if (i == 0) { line = ""; break }
              line = substr(line, i + 2); incom = 0
          } else {
              i = index(line, "/*")
              if (i == 0) { out = out line; line = ""; break }
              out = out substr(line, 1, i - 1) " "
              line = substr(line, i + 2); incom = 1
          }
      }
      print out }' "$hdr" |
    grep -oE '\bmk[A-Z][A-Za-z0-9]*[[:space:]]*\(' | tr -d ' \t(' |
    LC_ALL=C sort -u)
[ -n "$funcs" ] || fail "found no function declarations in $hdr"
for f in $funcs; do
    page=$man/man3/$f.3
    if [ ! -f "$page" ]; then
        fail "$f is declared in include/mkernel.h but man/man3/$f.3 is missing"
        continue
    fi
    t=$(so_target "$page")
    [ -z "$t" ] || page=$man/$t
    if [ ! -f "$page" ]; then
        fail "man/man3/$f.3 links to missing $t"
    elif awk '/^\.SH/ { on = ($2 == "NAME") ; next } on' "$page" |
            grep -qE "(^|[^A-Za-z0-9_])$f([^A-Za-z0-9_]|$)"; then
        pass
    else
        fail "${page#"$man"/} does not name $f in its NAME section"
    fi
    if [ -f "$page" ] && awk '/^\.SH/ { on = ($2 == "SYNOPSIS"); next }
                              on && /^\.SS Fortran/ { f = 1; next }
                              /^\.SS/ { f = 0 } on && f' "$page" |
            grep -qE "function $f\("; then
        pass
    else
        fail "${page#"$man"/} has no Fortran interface of $f in its SYNOPSIS"
    fi
done

# ---- (c) every MK_* parameter in mkernel-env(7) --------------------------
# Rows are X(ID, "MK_NAME", TYPE, "DEFAULT", MIN, MAX, DOC); a row may span
# lines, so the table is joined first.
rows=$(tr '\n' ' ' < "$params" |
    grep -oE 'X\([[:space:]]*[A-Z0-9_]+[[:space:]]*,[[:space:]]*"MK_[A-Z0-9_]+"[[:space:]]*,[[:space:]]*MKI_PT_[A-Z]+[[:space:]]*,[[:space:]]*"[^"]*"' |
    sed -E 's/.*"(MK_[A-Z0-9_]+)".*"([^"]*)"$/\1 \2/')
[ -n "$rows" ] || fail "found no X(...) parameter rows in $params"
if [ ! -f "$env7" ]; then
    fail "man/man7/mkernel-env.7 is missing"
else
    while read -r name def; do
        [ -n "$name" ] || continue
        # The entry: from a .TP whose tag line names it, to the next
        # .TP, .SS or .SH.
        entry=$(awk -v v="$name" '
            /^\.(TP|SH|SS)/ { on = 0; tp = ($0 ~ /^\.TP/); next }
            tp && ($0 == ".B " v || index($0, ".BR " v " ") == 1) { on = 1 }
            { tp = 0 }
            on' "$env7")
        if [ -z "$entry" ]; then
            fail "$name (src/core/params.def) has no entry in man/man7/mkernel-env.7"
        elif [ -n "$def" ] && ! printf '%s\n' "$entry" | grep -qF -- "$def"; then
            fail "man/man7/mkernel-env.7: the entry of $name does not give its default \"$def\""
        else
            pass
        fi
    done <<ROWS
$rows
ROWS
fi

[ -z "$skip_reason" ] || echo "SKIP: $skip_reason"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ] || exit 1
[ -z "$skip_reason" ] || exit 77
exit 0
