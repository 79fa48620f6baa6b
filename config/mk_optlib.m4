# MK_CHECK_OPTLIB(NAME, HEADER, LIB, FUNC, DEFAULT_CPPFLAGS, DESCRIPTION)
#
# An optional dependency with --with-NAME[=DIR]:
#   (not given)  use it when found, quietly go without otherwise;
#   --with-NAME  require it (error when missing);
#   --without-NAME  do not use it.
# Defines HAVE_<NAME> 0/1, AM_CONDITIONAL HAVE_<NAME>, and substitutes
# <NAME>_CPPFLAGS, <NAME>_LDFLAGS, <NAME>_LIBS.
AC_DEFUN([MK_CHECK_OPTLIB], [
    m4_pushdef([UP], m4_toupper([$1]))
    AC_ARG_WITH([$1],
        [AS_HELP_STRING([--with-$1=DIR], [$6 (default: use when found)])],
        [], [with_$1=check])
    mk_have=0
    UP[]_CPPFLAGS= UP[]_LDFLAGS= UP[]_LIBS=
    AS_IF([test "x$with_$1" != xno], [
        AS_CASE(["$with_$1"],
            [yes|check], [UP[]_CPPFLAGS="$5"],
            [UP[]_CPPFLAGS="-I$with_$1/include"
             AS_IF([test -d "$with_$1/lib64"], [UP[]_LDFLAGS="-L$with_$1/lib64"],
                   [UP[]_LDFLAGS="-L$with_$1/lib"])])
        mk_save_CPPFLAGS=$CPPFLAGS mk_save_LDFLAGS=$LDFLAGS mk_save_LIBS=$LIBS
        CPPFLAGS="$CPPFLAGS $UP[]_CPPFLAGS" LDFLAGS="$LDFLAGS $UP[]_LDFLAGS"
        AC_CHECK_HEADER([$2],
            [AC_CHECK_LIB([$3], [$4], [mk_have=1 UP[]_LIBS=-l$3])])
        CPPFLAGS=$mk_save_CPPFLAGS LDFLAGS=$mk_save_LDFLAGS LIBS=$mk_save_LIBS
        AS_IF([test $mk_have = 0 && test "x$with_$1" != xcheck],
            [AC_MSG_ERROR([--with-$1 was given but $2 / lib$3 was not found])])
    ])
    AS_IF([test $mk_have = 0], [UP[]_CPPFLAGS= UP[]_LDFLAGS=])
    AC_DEFINE_UNQUOTED([HAVE_]UP, [$mk_have], [$6 available])
    AM_CONDITIONAL([HAVE_]UP, [test $mk_have = 1])
    AC_SUBST(UP[_CPPFLAGS])
    AC_SUBST(UP[_LDFLAGS])
    AC_SUBST(UP[_LIBS])
    AS_IF([test $mk_have = 1], [mk_summary_$1=yes], [mk_summary_$1=no])
    m4_popdef([UP])
])
