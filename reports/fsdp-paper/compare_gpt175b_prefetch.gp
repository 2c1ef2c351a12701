# .ci/make-paper-report: GPT-175B: BACKWARD_PRE speedup over no prefetch. Re-render with: gnuplot compare_gpt175b_prefetch.gp
if (!exists("outfile")) outfile = "compare_gpt175b_prefetch.svg"
set terminal svg size 760,440 noenhanced font "Helvetica,12" background rgb "white"
set output outfile
set title "GPT-175B: BACKWARD_PRE speedup over no prefetch" font ",13"
set xlabel "GPUs (8 per node assumed)"
set ylabel "speedup (step time none / BACKWARD_PRE - 1, %)"
set grid lc rgb "#dddddd"
set key below
set logscale x 2
set xtics ("128" 128, "192" 192, "256" 256, "384" 384, "512" 512)
set xrange [112:590]
set yrange [0:25]
$d0 << EOD
128 16.38
192 17.14
256 17.73
384 18.65
512 19.39
EOD
$d1 << EOD
128 18
192 18
256 18
384 18
512 18
EOD
plot $d0 using 1:2 with linespoints lw 2 pt 7 lc rgb "#08519c" title "fsdpsim", \
     $d1 using 1:2 with lines dt 2 lw 2 lc rgb "#de2d26" title "paper: approximately 18 % (Sec. 5.3, Fig. 6b)"
