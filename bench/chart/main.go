// Command chart reads `go test -bench` output and draws throughput against the number of
// partitions as an SVG, one line per series (ordered, unordered), from the tasks/s metric of
// BenchmarkConsumePartitions. With several runs of one benchmark (-count) it plots their median.
// It uses the standard library only.
//
//	go test ./bench -run '^$' -bench ConsumePartitions -benchtime 20000x -count 3 | tee parts.txt
//	go run ./bench/chart -in parts.txt -out docs/benchmarks-partitions.svg
//
// -in may be given several times as label=file to draw runs side by side (for example
// before=old.txt -in after=new.txt); the series are then named "label ordered" and so on.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// inputs collects repeated -in flags.
type inputs []string

func (i *inputs) String() string     { return strings.Join(*i, ",") }
func (i *inputs) Set(v string) error { *i = append(*i, v); return nil }

// line matches one result line of BenchmarkConsumePartitions, for example
// "BenchmarkConsumePartitions/ordered/partitions-1000-2   20000   48137 ns/op   20774 tasks/s".
var line = regexp.MustCompile(`^BenchmarkConsumePartitions/(\w+)/partitions-(\d+)(?:-\d+)?\s+\d+\s+(.*)$`)

// series is one line of the chart: tasks/s samples by partition count.
type series struct {
	name    string
	samples map[int][]float64
}

func main() {
	var in inputs
	out := flag.String("out", "docs/benchmarks-partitions.svg", "SVG file to write")
	title := flag.String("title", "Consume throughput (8 consumers, fetch 5) against partitions", "chart title")
	flag.Var(&in, "in", "go test -bench output, as file or label=file; repeatable (default: stdin)")
	flag.Parse()
	if len(in) == 0 {
		in = inputs{"-"}
	}
	var all []*series
	for _, spec := range in {
		label, file, ok := strings.Cut(spec, "=")
		if !ok {
			label, file = "", spec
		}
		r := io.Reader(os.Stdin)
		if file != "-" {
			f, err := os.Open(file)
			if err != nil {
				log.Fatal(err)
			}
			defer f.Close()
			r = f
		}
		s, err := parse(r, label)
		if err != nil {
			log.Fatal(err)
		}
		all = append(all, s...)
	}
	if len(all) == 0 {
		log.Fatal("no BenchmarkConsumePartitions results with tasks/s in the input")
	}
	if err := os.WriteFile(*out, []byte(draw(*title, all)), 0o644); err != nil {
		log.Fatal(err)
	}
}

// parse reads benchmark output and returns its series, named label + mode.
func parse(r io.Reader, label string) ([]*series, error) {
	byName := map[string]*series{}
	var order []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := line.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		parts, err := strconv.Atoi(m[2])
		if err != nil {
			return nil, err
		}
		v, ok := metric(m[3], "tasks/s")
		if !ok {
			continue
		}
		name := strings.TrimSpace(label + " " + m[1])
		s := byName[name]
		if s == nil {
			s = &series{name: name, samples: map[int][]float64{}}
			byName[name] = s
			order = append(order, name)
		}
		s.samples[parts] = append(s.samples[parts], v)
	}
	out := make([]*series, 0, len(order))
	for _, n := range order {
		out = append(out, byName[n])
	}
	return out, sc.Err()
}

// metric finds "value unit" in the fields of a benchmark line.
func metric(fields, unit string) (float64, bool) {
	f := strings.Fields(fields)
	for i := 1; i < len(f); i++ {
		if f[i] == unit {
			v, err := strconv.ParseFloat(f[i-1], 64)
			return v, err == nil
		}
	}
	return 0, false
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

var colors = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

// draw renders the series on a log-scale partition axis and a linear tasks/s axis from 0.
func draw(title string, all []*series) string {
	const w, h, left, right, top, bottom = 760, 420, 80, 170, 50, 60
	pw, ph := float64(w-left-right), float64(h-top-bottom)
	minP, maxP, maxV := math.Inf(1), math.Inf(-1), 0.0
	for _, s := range all {
		for p, v := range s.samples {
			minP, maxP = math.Min(minP, float64(p)), math.Max(maxP, float64(p))
			maxV = math.Max(maxV, median(v))
		}
	}
	if minP == maxP {
		maxP = minP * 10
	}
	step := niceStep(maxV / 5)
	maxV = math.Ceil(maxV/step) * step
	x := func(p float64) float64 {
		return left + pw*(math.Log10(p)-math.Log10(minP))/(math.Log10(maxP)-math.Log10(minP))
	}
	y := func(v float64) float64 { return top + ph*(1-v/maxV) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="25" font-size="15" font-weight="bold">%s</text>`+"\n", left, escape(title))
	for v := 0.0; v <= maxV+step/2; v += step {
		fmt.Fprintf(&b, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, left+pw, y(v), y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y(v)+4, thousands(v))
	}
	for p := math.Pow(10, math.Floor(math.Log10(minP))); p <= maxP*1.001; p *= 10 {
		if p < minP*0.999 {
			continue
		}
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%.1f" stroke="#ddd"/>`+"\n", x(p), x(p), top, top+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x(p), top+ph+18, thousands(p))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">partitions (log scale)</text>`+"\n", left+pw/2, h-15)
	fmt.Fprintf(&b, `<text x="18" y="%.1f" text-anchor="middle" transform="rotate(-90 18 %.1f)">tasks/s (median of runs)</text>`+"\n", top+ph/2, top+ph/2)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%.1f" fill="none" stroke="#333"/>`+"\n", left, top, pw, ph)
	for i, s := range all {
		c := colors[i%len(colors)]
		dash := ""
		if strings.Contains(s.name, "before") {
			dash = ` stroke-dasharray="6 4"`
		}
		ps := make([]int, 0, len(s.samples))
		for p := range s.samples {
			ps = append(ps, p)
		}
		sort.Ints(ps)
		var pts []string
		for _, p := range ps {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(p)), y(median(s.samples[p]))))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), c, dash)
		for _, p := range ps {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s, %s partitions: %s tasks/s</title></circle>`+"\n",
				x(float64(p)), y(median(s.samples[p])), c, escape(s.name), thousands(float64(p)), thousands(median(s.samples[p])))
		}
		ly := top + 10 + 20*i
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", left+pw+12, left+pw+36, ly, ly, c, dash)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`+"\n", left+pw+42, ly+4, escape(s.name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceStep rounds v up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*e >= v {
			return m * e
		}
	}
	return 10 * e
}

// thousands formats v rounded, with commas: 1000000 → "1,000,000".
func thousands(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
