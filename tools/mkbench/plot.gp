# mkbench GEMM plot: ours vs cuBLAS TFLOP/s per shape, and the ratio.
# Reads the gemm.tsv that `bench_gemm` writes beside gemm.json.
#   gnuplot -e "in='bench/results/DEV/gemm.tsv'; out='bench/results/DEV/gemm.png'; dev='H100'" \
#           tools/mkbench/plot.gp
if (!exists("in")) in = 'gemm.tsv'
if (!exists("out")) out = 'gemm.png'
if (!exists("dev")) dev = ''
set terminal pngcairo size 1400,760 font ",10" noenhanced
set output out
set datafile separator "\t"
set title sprintf("GEMM bf16 %s: mkernel engine vs cuBLAS (median TFLOP/s; @116 = grid on 116 CTAs)", dev)
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -35 noenhanced
set bmargin 9
set ylabel "TFLOP/s"
set yrange [0:*]
set y2label "ours / cuBLAS"
set y2range [0:2]
set y2tics 0.25
set ytics nomirror
set grid ytics
set key top left
# every ::1 skips the header line
plot in every ::1 using 6:xtic(1) title "mkernel" lc rgb "#1f77b4", \
     '' every ::1 using 7 title "cuBLAS (all SMs)" lc rgb "#aaaaaa", \
     '' every ::1 using 0:($8 > 2 ? 2 : $8) axes x1y2 with linespoints pt 7 lc rgb "#d62728" \
        title "ratio (clipped at 2)"
