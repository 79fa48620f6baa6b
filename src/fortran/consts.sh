#!/bin/sh
# consts.sh - the Fortran module keeps up with mkernel.h: its constants
# equal the header's (every mkResult_t, mkDataType_t, mkAttnLayout_t and
# mkAttnMask_t value, the versions, the config magic, the unique id size,
# MK_SPLIT_NOCOLOR and the MoE limits MK_MOE_MAX_EXPERTS and
# MK_MOE_MAX_TOPK),
# and every function the header declares (MK_API) has an interface bound
# to it (a new call without its Fortran interface fails here).
hdr=${top_srcdir:-.}/include/mkernel.h
mod=${top_srcdir:-.}/src/fortran/mkernel.f90
passed=0 failed=0
check() { # name, C value, Fortran value
    if [ -n "$2" ] && [ "$2" = "$3" ]; then passed=$((passed + 1))
    else echo "FAIL: $1 is '$2' in mkernel.h but '$3' in mkernel.f90"
         failed=$((failed + 1)); fi
}
# NAME = value, as a parameter or an enumerator
fval() { sed -n "s/.*[^A-Za-z0-9_]$1 = \([-0-9]*\).*/\1/p" "$mod" | head -1; }
# check_enum TYPE LEAST: every member of the C enum TYPE (at least LEAST).
check_enum() {
    body=$(awk -v t="$1" '/typedef enum/ {body = ""; next}
                          {body = body "\n" $0}
                          $0 ~ "^} " t ";" {printf "%s", body}' "$hdr")
    names=$(printf '%b\n' "$body" | sed -n 's/^ *\(mk[A-Z][A-Za-z0-9]*\) = [0-9]*,*.*/\1/p')
    [ $(echo $names | wc -w) -ge "$2" ] || { echo "FAIL: found no $1 in $hdr"; exit 1; }
    for name in $names; do
        cval=$(printf '%b\n' "$body" | sed -n "s/^ *$name = \([0-9]*\).*/\1/p")
        check "$name" "$cval" "$(fval "$name")"
    done
}
check_enum mkResult_t 12
check_enum mkDataType_t 4
check_enum mkAttnLayout_t 2
check_enum mkAttnMask_t 3
for part in MAJOR MINOR PATCH; do
    cval=$(sed -n "s/^#define MK_VERSION_$part \([0-9]*\)/\1/p" "$hdr")
    check "MK_VERSION_$part" "$cval" "$(fval "MK_VERSION_$part")"
done
cval=$(sed -n 's/^#define MK_CONFIG_MAGIC 0x\([0-9a-f]*\)u.*/\1/p' "$hdr")
check MK_CONFIG_MAGIC "$cval" \
    "$(sed -n "s/.*MK_CONFIG_MAGIC = int(z'\([0-9a-f]*\)'.*/\1/p" "$mod")"
cval=$(sed -n 's/^#define MK_UNIQUE_ID_BYTES \([0-9]*\)/\1/p' "$hdr")
check MK_UNIQUE_ID_BYTES "$cval" "$(fval MK_UNIQUE_ID_BYTES)"
cval=$(sed -n 's/^#define MK_SPLIT_NOCOLOR (\(-[0-9]*\))/\1/p' "$hdr")
check MK_SPLIT_NOCOLOR "$cval" "$(fval MK_SPLIT_NOCOLOR)"
for name in MK_MOE_MAX_EXPERTS MK_MOE_MAX_TOPK; do
    cval=$(sed -n "s/^#define $name \([0-9]*\)\$/\1/p" "$hdr")
    check "$name" "$cval" "$(fval "$name")"
done
# every MK_API function of the header, declarations joined into one line
funcs=$(tr '\n' ' ' < "$hdr" | grep -o 'MK_API[^;(]*[^A-Za-z0-9_]mk[A-Za-z0-9_]*(' |
        sed 's/.*[^A-Za-z0-9_]\(mk[A-Za-z0-9_]*\)($/\1/' | sort -u)
[ $(echo $funcs | wc -w) -ge 20 ] || { echo "FAIL: found no MK_API functions in $hdr"; exit 1; }
for fn in $funcs; do
    if grep -q "bind(C, *name=\"$fn\")" "$mod"; then passed=$((passed + 1))
    else echo "FAIL: $fn is in mkernel.h but has no interface in mkernel.f90"
         failed=$((failed + 1)); fi
done
echo "$passed passed, $failed failed"
[ $failed = 0 ]
