# .ci/make-paper-report: T5: FSDP vs DDP, hardware TFLOPS/GPU on 8 A100-80GB. Re-render with: gnuplot compare_t5_fsdp_vs_ddp.gp
if (!exists("outfile")) outfile = "compare_t5_fsdp_vs_ddp.svg"
set terminal svg size 760,440 noenhanced font "Helvetica,12" background rgb "white"
set output outfile
set title "T5: FSDP vs DDP, hardware TFLOPS/GPU on 8 A100-80GB" font ",13"
set xlabel "model"
set ylabel "TFLOPS per GPU (log scale; missing = out of memory)"
set grid lc rgb "#dddddd"
set key below
set xtics ("611M" 0, "2.28B" 1, "11B" 2)
set xrange [-0.5:2.5]
set logscale y 10
set yrange [5:300]
$d0 << EOD
-0.08 37.48
0.92 54.52
1.92 61.30
EOD
$d1 << EOD
0.08 36.12
1.08 51.52
EOD
$d2 << EOD
-0.08 55.10
0.92 87.30
1.92 102.97
EOD
$d3 << EOD
0.08 50.56
1.08 77.25
EOD
$d4 << EOD
-0.08 15.18
0.92 27.4
1.92 148.48
EOD
$d5 << EOD
0.08 14.61
1.08 25.76
EOD
plot $d0 using 1:2 with points ps 1.4 pt 7 lc rgb "#08519c" title "fsdpsim FSDP fp32", \
     $d1 using 1:2 with points ps 1.4 pt 5 lc rgb "#6baed6" title "fsdpsim DDP fp32", \
     $d2 using 1:2 with points ps 1.4 pt 7 lc rgb "#a50f15" title "fsdpsim FSDP bf16", \
     $d3 using 1:2 with points ps 1.4 pt 5 lc rgb "#fc9272" title "fsdpsim DDP bf16", \
     $d4 using 1:2 with points ps 1.6 pt 6 lw 2 lc rgb "#252525" title "paper FSDP [U]: 611M, 2.28B (no BF16), 11B BF16", \
     $d5 using 1:2 with points ps 1.6 pt 4 lw 2 lc rgb "#737373" title "paper DDP [U]"
