package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// render writes the table (or JSON) and a one-line summary.
func render(w io.Writer, rows []Row, output string, allNamespaces bool) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Items   []Row         `json:"items"`
			Summary map[State]int `json:"summary"`
		}{Items: append([]Row{}, rows...), Summary: count(rows)})
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "No RebootPolicy, Memcached or NSScaler found.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "KIND\tNAMESPACE\tNAME\tSTATE\tREASON\tDETAILS"
	if !allNamespaces {
		header = "KIND\tNAME\tSTATE\tREASON\tDETAILS"
	}
	_, _ = fmt.Fprintln(tw, header)
	for _, r := range rows {
		details := oneLine(r.Details)
		if output != "wide" {
			details = truncate(details, 100)
		}
		ns := r.Namespace
		if ns == "" {
			ns = "-"
		}
		if allNamespaces {
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Kind, printable(ns), printable(r.Name), r.State, printable(r.Reason), details)
		} else {
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Kind, printable(r.Name), r.State, printable(r.Reason), details)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	c := count(rows)
	var parts []string
	for _, s := range states {
		parts = append(parts, fmt.Sprintf("%d %s", c[s], strings.ToLower(string(s))))
	}
	_, err := fmt.Fprintf(w, "\n%d objects: %s\n", len(rows), strings.Join(parts, ", "))
	return err
}

func count(rows []Row) map[State]int {
	c := map[State]int{}
	for _, s := range states {
		c[s] = 0
	}
	for _, r := range rows {
		c[r.State]++
	}
	return c
}
