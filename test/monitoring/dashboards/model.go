// Package dashboards defines Runbook's Grafana dashboards as code and renders
// them as Grafana's dashboard JSON (config/grafana/dashboards/*.json, copied
// into the Helm chart by `make manifests`). `make dashboards` writes the files;
// test/monitoring fails when the committed JSON differs from what this
// package renders, and evaluates every panel's queries against a live scrape.
package dashboards

import (
	"bytes"
	"encoding/json"
)

// Dashboard is one Grafana dashboard.
type Dashboard struct {
	// File is the JSON file's name in config/grafana/dashboards.
	File        string
	UID         string
	Title       string
	Description string
	Vars        []Variable
	Rows        []Row
}

// Row is a titled group of panels, laid out left to right.
type Row struct {
	Title  string
	Panels []Panel
}

// PanelType is a Grafana panel plugin.
type PanelType string

const (
	TimeSeries PanelType = "timeseries"
	Stat       PanelType = "stat"
)

// Panel is one graph or single stat.
type Panel struct {
	Type        PanelType
	Title       string
	Description string
	// Unit is Grafana's unit id: s, bytes, Bps, ops, percentunit, short.
	Unit    string
	Targets []Target
	// Width in grid columns of 24 (default: 8 for graphs, 4 for stats).
	Width int
}

// Target is one PromQL query of a panel.
type Target struct {
	Expr   string
	Legend string
}

// Variable is a template variable: the data source, or a query variable
// whose values are label_values(Query, Label).
type Variable struct {
	Name, Label string
	// Query is the series selector of label_values; empty for the data source.
	Query, Field string
	// All adds an "All" option matching every value (allValue .*).
	All bool
}

// AllValue is what an "All" selection of a variable expands to.
const AllValue = ".*"

// Definition is the variable's label_values(...) query.
func (v Variable) Definition() string {
	return "label_values(" + v.Query + ", " + v.Field + ")"
}

// Panels lists the dashboard's panels (rows excluded) in order.
func (d Dashboard) Panels() []Panel {
	var out []Panel
	for _, r := range d.Rows {
		out = append(out, r.Panels...)
	}
	return out
}

var datasource = map[string]any{"type": "prometheus", "uid": "${datasource}"}

// JSON renders the dashboard as Grafana stores it (schemaVersion 39), with
// the other Runbook dashboards linked by tag.
func (d Dashboard) JSON() ([]byte, error) {
	m := map[string]any{
		"uid":                  d.UID,
		"title":                d.Title,
		"description":          d.Description,
		"tags":                 []string{"runbook"},
		"editable":             true,
		"graphTooltip":         1,
		"schemaVersion":        39,
		"version":              1,
		"time":                 map[string]any{"from": "now-6h", "to": "now"},
		"refresh":              "30s",
		"timezone":             "browser",
		"fiscalYearStartMonth": 0,
		"liveNow":              false,
		"annotations":          map[string]any{"list": []any{}},
		"links": []any{map[string]any{
			"type": "dashboards", "tags": []string{"runbook"}, "asDropdown": true, "title": "Runbook",
			"includeVars": true, "keepTime": true, "icon": "external link", "targetBlank": false, "tooltip": "", "url": "",
		}},
		"templating": map[string]any{"list": d.variables()},
		"panels":     d.layout(),
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func (d Dashboard) variables() []any {
	out := []any{map[string]any{
		"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
		"current": map[string]any{}, "hide": 0, "refresh": 1, "regex": "", "options": []any{}, "includeAll": false, "multi": false,
	}}
	for _, v := range d.Vars {
		def := v.Definition()
		m := map[string]any{
			"name": v.Name, "label": v.Label, "type": "query", "datasource": datasource,
			"definition": def,
			"query":      map[string]any{"qryType": 1, "query": def, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
			"refresh":    2, "sort": 1, "hide": 0, "regex": "", "current": map[string]any{}, "options": []any{},
			"includeAll": v.All, "multi": v.All,
		}
		if v.All {
			m["allValue"] = AllValue
		}
		out = append(out, m)
	}
	return out
}

// layout places rows and panels on Grafana's 24-column grid.
func (d Dashboard) layout() []any {
	var out []any
	id, y := 1, 0
	for _, r := range d.Rows {
		out = append(out, map[string]any{
			"type": "row", "title": r.Title, "id": id, "collapsed": false, "panels": []any{},
			"gridPos": map[string]any{"h": 1, "w": 24, "x": 0, "y": y},
		})
		id++
		y++
		x, rowHeight := 0, 0
		for _, p := range r.Panels {
			w, h := p.size()
			if x+w > 24 {
				x, y, rowHeight = 0, y+rowHeight, 0
			}
			out = append(out, p.json(id, x, y, w, h))
			id++
			x += w
			rowHeight = max(rowHeight, h)
		}
		y += rowHeight
	}
	return out
}

func (p Panel) size() (w, h int) {
	switch {
	case p.Width > 0 && p.Type == Stat:
		return p.Width, 4
	case p.Width > 0:
		return p.Width, 8
	case p.Type == Stat:
		return 4, 4
	}
	return 8, 8
}

func (p Panel) json(id, x, y, w, h int) map[string]any {
	targets := make([]any, 0, len(p.Targets))
	for i, t := range p.Targets {
		targets = append(targets, map[string]any{
			"refId": string(rune('A' + i)), "datasource": datasource, "expr": t.Expr,
			"legendFormat": legendOrAuto(t.Legend), "range": p.Type == TimeSeries, "instant": p.Type == Stat, "editorMode": "code",
		})
	}
	m := map[string]any{
		"id": id, "type": string(p.Type), "title": p.Title, "description": p.Description, "datasource": datasource,
		"gridPos": map[string]any{"h": h, "w": w, "x": x, "y": y},
		"targets": targets,
	}
	defaults := map[string]any{
		"unit":       p.unit(),
		"color":      map[string]any{"mode": "palette-classic"},
		"thresholds": map[string]any{"mode": "absolute", "steps": []any{map[string]any{"color": "green", "value": nil}}},
	}
	switch p.Type {
	case Stat:
		defaults["color"] = map[string]any{"mode": "thresholds"}
		m["options"] = map[string]any{
			"reduceOptions": map[string]any{"calcs": []string{"lastNotNull"}, "fields": "", "values": false},
			"colorMode":     "value", "graphMode": "area", "justifyMode": "auto", "orientation": "auto", "textMode": "auto",
		}
	default:
		defaults["custom"] = map[string]any{
			"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never", "spanNulls": true,
			"stacking": map[string]any{"mode": "none", "group": "A"},
		}
		m["options"] = map[string]any{
			"legend":  map[string]any{"displayMode": "table", "placement": "bottom", "showLegend": true, "calcs": []string{"lastNotNull", "max"}},
			"tooltip": map[string]any{"mode": "multi", "sort": "desc"},
		}
	}
	m["fieldConfig"] = map[string]any{"defaults": defaults, "overrides": []any{}}
	return m
}

func (p Panel) unit() string {
	if p.Unit == "" {
		return "short"
	}
	return p.Unit
}

func legendOrAuto(l string) string {
	if l == "" {
		return "__auto"
	}
	return l
}
