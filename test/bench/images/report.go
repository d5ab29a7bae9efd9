package main

import (
	"fmt"
	"os"
	"text/tabwriter"
)

func report(o options, baseSize int64, b built, results []result, rssBuilt int64, cpu float64) {
	fmt.Println()
	fmt.Printf("image-customization-controller, N=%d PreprovisioningImages (ISO, static nmstate each), base ISO %.2f GiB\n", o.n, float64(baseSize)/(1<<30))
	fmt.Printf("  all Ready after               %6.1f s (%.1f images/s)\n", b.ready.Seconds(), float64(o.n)/b.ready.Seconds())
	fmt.Printf("  all sha256 annotations after  %6.1f s (background, one worker)\n", b.summed.Seconds())
	fmt.Printf("  controller peak RSS after the builds %d MiB; CPU over the whole run %.1f s\n", rssBuilt>>20, cpu)
	fmt.Println()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Printf("downloads: medians of %d interleaved rounds\n", o.rounds)
	fmt.Fprintln(tw, "concurrent full downloads\tcat (MiB/s)\tstatic server (MiB/s)\tcontroller (MiB/s)\tcontroller / cat\tcontroller / static\tcontroller RSS before (MiB)\tpeak RSS during (MiB)\tcontroller CPU (s)\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%d\t%.0f\t%.0f\t%.0f\t%.0f %%\t%.0f %%\t%d\t%d\t%.1f\t\n", r.count, r.cat/(1<<20), r.static/(1<<20), r.icc/(1<<20),
			100*r.icc/r.cat, 100*r.icc/r.static, r.rssBefore>>20, r.rss>>20, r.cpu)
	}
	_ = tw.Flush()
}
