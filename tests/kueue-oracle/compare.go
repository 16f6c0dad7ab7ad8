package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
)

// A run as a schedule row gives it, for comparison.
type runKey struct {
	attempt      int
	start, end   int64
	endedBy      string
	preemptedFor string
}

// readRuns reads a schedule's runs by job, each job's in attempt order.
func readRuns(path string) (map[string][]runKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	col := map[string]int{}
	for i, name := range header {
		col[name] = i
	}
	for _, name := range []string{"id", "start", "end", "attempt", "ended_by", "preempted_for"} {
		if _, ok := col[name]; !ok {
			return nil, fmt.Errorf("%s: no column %q: not a schedule", path, name)
		}
	}
	jobs := map[string][]runKey{}
	for {
		row, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		start, err1 := strconv.ParseInt(row[col["start"]], 10, 64)
		end, err2 := strconv.ParseInt(row[col["end"]], 10, 64)
		attempt, err3 := strconv.Atoi(row[col["attempt"]])
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("%s: a row of job %q without a start, end or attempt", path, row[col["id"]])
		}
		id := row[col["id"]]
		jobs[id] = append(jobs[id], runKey{attempt, start, end, row[col["ended_by"]], row[col["preempted_for"]]})
	}
	for _, runs := range jobs {
		slices.SortFunc(runs, func(a, b runKey) int { return a.attempt - b.attempt })
	}
	return jobs, nil
}

// agreement is how two schedules of the same jobs agree, job by job.
type agreement struct {
	Jobs int `json:"jobs"`
	// Jobs first admitted at the same instant.
	SameFirstStart int `json:"same_first_start"`
	// Jobs whose runs are all the same: admitted and ended at the same instants, preempted
	// (or not) for the same jobs.
	SameRuns int `json:"same_runs"`
	// Preemptions in each.
	Preemptions [2]int `json:"preemptions"`
	// Jobs in one schedule and not the other.
	Missing int `json:"missing"`
	// The earliest instant at which the two differ (a start or end one has and the other
	// has not), with the job; -1 when they agree throughout.
	FirstDifference int64  `json:"first_difference"`
	FirstJob        string `json:"first_difference_job"`
}

func compareRuns(a, b map[string][]runKey) agreement {
	out := agreement{Jobs: len(a), FirstDifference: -1}
	note := func(at int64, id string) {
		if out.FirstDifference < 0 || at < out.FirstDifference || (at == out.FirstDifference && id < out.FirstJob) {
			out.FirstDifference, out.FirstJob = at, id
		}
	}
	for _, runs := range b {
		for _, r := range runs {
			if r.endedBy == "preempted" {
				out.Preemptions[1]++
			}
		}
	}
	for id, ra := range a {
		for _, r := range ra {
			if r.endedBy == "preempted" {
				out.Preemptions[0]++
			}
		}
		rb, ok := b[id]
		if !ok {
			out.Missing++
			continue
		}
		if ra[0].start == rb[0].start {
			out.SameFirstStart++
		}
		if slices.Equal(ra, rb) {
			out.SameRuns++
			continue
		}
		for i := 0; i < max(len(ra), len(rb)); i++ {
			if i >= len(ra) || i >= len(rb) {
				shorter := ra
				if i >= len(ra) {
					shorter = rb
				}
				note(shorter[len(shorter)-1].end, id)
				break
			}
			x, y := ra[i], rb[i]
			if x.start != y.start {
				note(min(x.start, y.start), id)
				break
			}
			if x != y {
				note(min(x.end, y.end), id)
				break
			}
		}
	}
	for id := range b {
		if _, ok := a[id]; !ok {
			out.Missing++
		}
	}
	return out
}

// compare is `kueue-oracle compare A.csv B.csv...`: A against each B, as JSON.
func compare(paths []string) error {
	if len(paths) < 2 {
		return fmt.Errorf("compare: give two schedules or more (the first is compared with each other)")
	}
	first, err := readRuns(paths[0])
	if err != nil {
		return err
	}
	var results []agreement
	for _, p := range paths[1:] {
		other, err := readRuns(p)
		if err != nil {
			return err
		}
		results = append(results, compareRuns(first, other))
	}
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetIndent("", "  ")
	return encoder.Encode(results)
}
