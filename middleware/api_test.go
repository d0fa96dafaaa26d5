package middleware_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/middleware"
)

// TestMetricsBuckets: the histograms take OTelConfig's bucket boundaries (DefaultBuckets when
// unset), and boundaries out of order or not finite are refused with srq.ErrInvalid.
func TestMetricsBuckets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	custom := []float64{0.5, 1, 2}
	mw, err := middleware.Metrics(middleware.OTelConfig{MeterProvider: mp, DurationBuckets: custom})
	if err != nil {
		t.Fatal(err)
	}
	d := &srq.Delivery{Delivery: engine.Delivery{ID: "t", Attempt: 1, AvailableAt: time.Now()}, Queue: "q"}
	if err := mw(func(context.Context, *srq.Delivery) error { return nil })(ctx, d); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string][]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok {
				got[m.Name] = h.DataPoints[0].Bounds
			}
		}
	}
	if !slices.Equal(got[middleware.MetricProcessDuration], custom) || !slices.Equal(got[middleware.MetricLag], middleware.DefaultBuckets()) {
		t.Errorf("bounds %v", got)
	}

	for _, bad := range []middleware.OTelConfig{
		{DurationBuckets: []float64{1, 0.5}},
		{DurationBuckets: []float64{1, 1}},
		{LagBuckets: []float64{0.1, math.NaN()}},
		{LagBuckets: []float64{0.1, math.Inf(1)}},
	} {
		bad.MeterProvider = mp
		if _, err := middleware.Metrics(bad); !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("Metrics(%v): %v, want ErrInvalid", bad, err)
		}
	}
}

// TestExportedSignaturesUseExportedTypes: no exported function, method, type, field, constant
// or variable of the package names one of its unexported types, so godoc shows every type a
// caller needs.
func TestExportedSignaturesUseExportedTypes(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
	}
	unexported := map[string]bool{} // the package's unexported type names
	for _, f := range files {
		for _, decl := range f.Decls {
			if gd, ok := decl.(*ast.GenDecl); ok && gd.Tok == token.TYPE {
				for _, spec := range gd.Specs {
					if name := spec.(*ast.TypeSpec).Name.Name; !ast.IsExported(name) {
						unexported[name] = true
					}
				}
			}
		}
	}
	check := func(where string, n ast.Node) {
		if n == nil {
			return
		}
		ast.Inspect(n, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				return false // another package's name
			case *ast.Ident:
				if unexported[n.Name] {
					t.Errorf("%s (%s) uses the unexported type %s", where, fset.Position(n.Pos()), n.Name)
				}
			case *ast.FuncLit, *ast.BlockStmt:
				return false // bodies are not signatures
			}
			return true
		})
	}
	for _, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv != nil {
					recv := d.Recv.List[0].Type
					if star, ok := recv.(*ast.StarExpr); ok {
						recv = star.X
					}
					if id, ok := recv.(*ast.Ident); ok && !id.IsExported() {
						continue // a method of an unexported type is not in godoc
					}
				}
				check(d.Name.Name, d.Type)
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, field := range st.Fields.List {
								if len(field.Names) == 0 || field.Names[0].IsExported() {
									check(s.Name.Name+" field", field.Type)
								}
							}
							continue
						}
						check(s.Name.Name, s.Type)
					case *ast.ValueSpec:
						if s.Names[0].IsExported() {
							check(s.Names[0].Name, s.Type)
						}
					}
				}
			}
		}
	}
}
