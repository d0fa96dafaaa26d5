package web

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"

	"github.com/srqueue/srq/inspect"
)

// The flow page draws a flow's DAG as inline SVG, laid out here and written by the template
// (html/template escapes every name and error): a column per level (the longest path from a step
// without parents), steps in a column ordered by where their parents are, edges as curves from a
// parent's right side to a child's left, dashed or dotted by their failure policy.

// Geometry of the drawing, in SVG user units (pixels at 100%).
const (
	dagNodeW   = 176
	dagNodeH   = 46
	dagGapX    = 72
	dagGapY    = 18
	dagMargin  = 12
	dagNameMax = 22 // runes of a step's name drawn in its box; the tooltip has the whole name
	// dagMaxSteps is the most steps drawn; a larger flow is shown as its table only.
	dagMaxSteps = 400
)

// dagView is a flow's DAG laid out for the template.
type dagView struct {
	Width, Height int
	Nodes         []dagNode
	Edges         []dagEdge
}

// dagNode is one step's box.
type dagNode struct {
	X, Y, W, H int
	Name       string // the step's name, cut to dagNameMax runes
	Sub        string // its state, and its queue when not the flow's
	State      string
	Step       string // the whole name
	Title      string // the tooltip
	Link       string // its task page, for a step whose task record exists; else ""
}

// dagEdge is one dependency, drawn from the parent to the child.
type dagEdge struct {
	Path   string // SVG path data
	Policy string // fail, continue or ignore
	From   string
	To     string
	// LX, LY is where the policy's label goes (a continue or ignore edge only).
	LX, LY int
}

// taskStates are the step states whose task record exists, so its task page has something to show.
var taskStates = map[string]bool{"waiting": true, "pending": true, "leased": true, "dead": true}

// layoutDAG lays out f's steps; nil for a flow of more than dagMaxSteps steps.
func layoutDAG(f inspect.Flow) *dagView {
	if len(f.Steps) > dagMaxSteps || len(f.Steps) == 0 {
		return nil
	}
	levels := 0
	for _, s := range f.Steps {
		levels = max(levels, s.Level+1)
	}
	cols := make([][]int, levels) // step indexes per level, in definition order
	for i, s := range f.Steps {
		cols[s.Level] = append(cols[s.Level], i)
	}
	index := make(map[string]int, len(f.Steps))
	for i, s := range f.Steps {
		index[s.Name] = i
	}
	// Order each column by the mean row of the step's parents (a barycenter pass, left to right),
	// which keeps most edges short and uncrossed; ties keep the definition order.
	row := make([]float64, len(f.Steps))
	for _, col := range cols {
		key := make(map[int]float64, len(col))
		for _, i := range col {
			sum, n := 0.0, 0
			for _, e := range f.Steps[i].Parents {
				if j, ok := index[e.Parent]; ok {
					sum += row[j]
					n++
				}
			}
			if n > 0 {
				key[i] = sum / float64(n)
			}
		}
		slices.SortStableFunc(col, func(a, b int) int { return cmp.Compare(key[a], key[b]) })
		for r, i := range col {
			row[i] = float64(r)
		}
	}
	tallest := 0
	for _, col := range cols {
		tallest = max(tallest, len(col))
	}
	v := &dagView{
		Width:  2*dagMargin + levels*dagNodeW + (levels-1)*dagGapX,
		Height: 2*dagMargin + tallest*dagNodeH + (tallest-1)*dagGapY,
		Nodes:  make([]dagNode, len(f.Steps)),
	}
	for l, col := range cols {
		// A shorter column is centred on the tallest.
		top := dagMargin + (tallest-len(col))*(dagNodeH+dagGapY)/2
		for r, i := range col {
			s := f.Steps[i]
			n := dagNode{X: dagMargin + l*(dagNodeW+dagGapX), Y: top + r*(dagNodeH+dagGapY), W: dagNodeW, H: dagNodeH,
				Name: cut(s.Name, dagNameMax), Sub: s.State, State: s.State, Step: s.Name}
			if s.Queue != f.Queue {
				n.Sub += " · " + cut(s.Queue, dagNameMax-len(s.State)-3)
			}
			n.Title = fmt.Sprintf("%s: %s, queue %s", s.Name, s.State, s.Queue)
			if s.Error != "" {
				n.Title += "\n" + s.Error
			}
			if taskStates[s.State] {
				n.Link = "./task?" + url.Values{"q": {s.Queue}, "id": {s.ID}}.Encode()
			}
			v.Nodes[i] = n
		}
	}
	for i, s := range f.Steps {
		c := v.Nodes[i]
		for _, e := range s.Parents {
			j, ok := index[e.Parent]
			if !ok {
				continue
			}
			p := v.Nodes[j]
			x1, y1 := p.X+p.W, p.Y+p.H/2
			x2, y2 := c.X-2, c.Y+c.H/2 // short of the box: the arrowhead ends at its edge
			bend := dagGapX / 2
			edge := dagEdge{Policy: e.Policy, From: e.Parent, To: s.Name,
				Path: fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, x1+bend, y1, x2-bend, y2, x2, y2),
				LX:   x2 - dagGapX/3, LY: y2 - 6}
			v.Edges = append(v.Edges, edge)
		}
	}
	return v
}

// cut returns s cut to n runes, with an ellipsis when it was longer.
func cut(s string, n int) string {
	r := []rune(s)
	if n < 2 || len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
