# fsdpsim report: best throughput that fits over hardware.node_speed_spread and hardware.nodes.
# From sweep.csv; data: heatmap_hardware_node_speed_spread__hardware_nodes.tsv (block 0: cells with a point that fits; block 1: cells without). Edit freely, then re-render with: gnuplot heatmap_hardware_node_speed_spread__hardware_nodes.gp
if (!exists("outfile")) outfile = 'heatmap_hardware_node_speed_spread__hardware_nodes.svg'
set terminal svg size 820,600 noenhanced font "Helvetica,12" background rgb "white"
set output outfile
set datafile separator "\t"
set title "best tokens/s per GPU that fits (over the other axes)"
set xrange [-0.5:3.5]
set xtics ('0' 0, '0.01' 1, '0.025' 2, '0.05' 3)
set yrange [-0.5:6.5]
set ytics ('1' 0, '2' 1, '4' 2, '8' 3, '16' 4, '32' 5, '64' 6)
set xlabel 'hardware.node_speed_spread'
set ylabel 'hardware.nodes'
set tics scale 0
unset key
set palette defined (0 "#ffffcc", 1 "#a1dab4", 2 "#41b6c4")
set cblabel "tokens/s per GPU"
plot "heatmap_hardware_node_speed_spread__hardware_nodes.tsv" index 0 using 1:2:(0.5):(0.5):3 with boxxyerror fs solid 1.0 noborder fc palette, \
     "heatmap_hardware_node_speed_spread__hardware_nodes.tsv" index 0 using 1:2:4 with labels
