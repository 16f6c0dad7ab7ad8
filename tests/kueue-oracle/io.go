package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/config"
	// The batch/job integration, which Kueue's default Configuration names (the check of
	// integrations.frameworks wants it registered).
	_ "sigs.k8s.io/kueue/pkg/controller/jobs/job"
)

// job is one line of the workloads file: a job of the trace as allot routes it to Kueue.
type job struct {
	ID       string `json:"id"`
	Project  string `json:"project"`
	User     string `json:"user"`
	Cluster  string `json:"cluster"`
	Contract string `json:"contract"`
	GPUs     int64  `json:"gpus"`
	// When it enters its queue (its eligibility, else its submission), seconds since the epoch.
	Submit int64 `json:"submit"`
	// Seconds of work it does when it runs to its end.
	Work int64 `json:"work"`
	// Whether a preempted run's work is kept (else the job starts over).
	Resumable bool `json:"resumable"`
	// The ClusterQueue it is submitted to, and its priority.
	ClusterQueue string `json:"cluster_queue"`
	Priority     int32  `json:"priority"`
}

// readWorkloads reads the workloads file, checking each line.
func readWorkloads(path string) ([]*job, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var jobs []*job
	seen := map[string]bool{}
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for scanner.Scan() {
		line++
		if strings.TrimSpace(scanner.Text()) == "" {
			continue
		}
		var j job
		decoder := json.NewDecoder(strings.NewReader(scanner.Text()))
		decoder.DisallowUnknownFields()
		if err := decoder.Decode(&j); err != nil {
			return nil, fmt.Errorf("%s: line %d: %w", path, line, err)
		}
		switch {
		case j.ID == "" || seen[j.ID]:
			return nil, fmt.Errorf("%s: line %d: an empty or repeated id %q", path, line, j.ID)
		case j.GPUs <= 0 || j.Work < 0:
			return nil, fmt.Errorf("%s: line %d: gpus must be positive and work not negative", path, line)
		case len(jobs) > 0 && j.Submit < jobs[len(jobs)-1].Submit:
			return nil, fmt.Errorf("%s: line %d: not in submission order", path, line)
		case j.ClusterQueue == "":
			return nil, fmt.Errorf("%s: line %d: no cluster_queue", path, line)
		}
		seen[j.ID] = true
		jobs = append(jobs, &j)
	}
	return jobs, scanner.Err()
}

// objectSet is one cluster's Kueue objects.
type objectSet struct {
	flavors  []*kueue.ResourceFlavor
	cohorts  []*kueue.Cohort
	queues   []*kueue.ClusterQueue
	priority []*kueue.WorkloadPriorityClass
}

// readObjects reads DIR's .yaml, .yml and .json files in name order (not its subfolders),
// each a stream of documents, each an object or a List of them. Kueue's ResourceFlavors,
// Cohorts, ClusterQueues and WorkloadPriorityClasses (v1beta2) are kept; LocalQueues and
// other kinds are passed over (the oracle submits to ClusterQueues through LocalQueues of
// its own).
func readObjects(dir string) (*objectSet, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	set := &objectSet{}
	for _, entry := range entries {
		ext := filepath.Ext(entry.Name())
		if !entry.Type().IsRegular() || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			continue
		}
		path := filepath.Join(dir, entry.Name())
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		decoder := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			var doc map[string]any
			err := decoder.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			if doc == nil {
				continue
			}
			if err := set.add(&unstructured.Unstructured{Object: doc}); err != nil {
				f.Close()
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
		f.Close()
	}
	return set, nil
}

func (s *objectSet) add(u *unstructured.Unstructured) error {
	if u.IsList() {
		return u.EachListItem(func(item runtime.Object) error {
			return s.add(item.(*unstructured.Unstructured))
		})
	}
	gvk := u.GroupVersionKind()
	if gvk.Group != kueue.GroupVersion.Group {
		return nil
	}
	if gvk.Version != kueue.GroupVersion.Version && gvk.Kind != "LocalQueue" {
		return fmt.Errorf("%s %q: only %s is read", gvk.Kind, u.GetName(), kueue.GroupVersion)
	}
	switch gvk.Kind {
	case "ResourceFlavor":
		return decodeInto(u, &s.flavors)
	case "Cohort":
		return decodeInto(u, &s.cohorts)
	case "ClusterQueue":
		return decodeInto(u, &s.queues)
	case "WorkloadPriorityClass":
		return decodeInto(u, &s.priority)
	}
	return nil
}

// decodeInto converts an object read as YAML to its Kueue type, appended to `list`;
// unknown fields are an error.
func decodeInto[T any](u *unstructured.Unstructured, list *[]*T) error {
	o := new(T)
	*list = append(*list, o)
	return runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, o, true)
}

// coveredResource is the one resource the ClusterQueues cover (allot's cover the GPUs alone).
func (s *objectSet) coveredResource() (string, error) {
	covered := map[string]bool{}
	for _, cq := range s.queues {
		for _, group := range cq.Spec.ResourceGroups {
			for _, r := range group.CoveredResources {
				covered[string(r)] = true
			}
		}
	}
	if len(covered) != 1 {
		names := make([]string, 0, len(covered))
		for r := range covered {
			names = append(names, r)
		}
		sort.Strings(names)
		return "", fmt.Errorf("the ClusterQueues cover %d resources (%s): name the GPUs' with --resource", len(names), strings.Join(names, ", "))
	}
	for r := range covered {
		return r, nil
	}
	return "", nil
}

// loadConfiguration reads Kueue's Configuration as Kueue's manager does (defaults applied,
// validated), from the file itself or from the ConfigMap that holds it under
// `controller_manager_config.yaml`. No file: Kueue's defaults.
func loadConfiguration(path string) (configapi.Configuration, error) {
	scheme := runtime.NewScheme()
	if err := configapi.AddToScheme(scheme); err != nil {
		return configapi.Configuration{}, err
	}
	if path != "" {
		text, err := os.ReadFile(path)
		if err != nil {
			return configapi.Configuration{}, err
		}
		var doc map[string]any
		if err := utilyaml.Unmarshal(text, &doc); err != nil {
			return configapi.Configuration{}, fmt.Errorf("%s: %w", path, err)
		}
		if doc["kind"] == "ConfigMap" {
			data, _ := doc["data"].(map[string]any)
			inner, ok := data["controller_manager_config.yaml"].(string)
			if !ok {
				return configapi.Configuration{}, fmt.Errorf("%s: a ConfigMap without data.controller_manager_config.yaml", path)
			}
			tmp, err := os.CreateTemp("", "kueue-config-*.yaml")
			if err != nil {
				return configapi.Configuration{}, err
			}
			defer os.Remove(tmp.Name())
			if _, err := tmp.WriteString(inner); err != nil {
				return configapi.Configuration{}, err
			}
			tmp.Close()
			path = tmp.Name()
		}
	}
	_, cfg, err := config.Load(scheme, path)
	if err != nil {
		return cfg, fmt.Errorf("Kueue's Configuration: %w", err)
	}
	if len(cfg.FeatureGates) > 0 {
		return cfg, errors.New("Kueue's Configuration sets featureGates, which the oracle does not apply")
	}
	return cfg, nil
}

// runRow is one run of a job, a row of the schedule.
type runRow struct {
	job          *job
	queued       int64
	start, end   int64
	wait         *int64
	attempt      int
	endedBy      string
	preemptedFor string
}

var columns = []string{"id", "project", "user", "cluster", "gpus", "submit", "start", "end", "contract", "wait", "attempt", "ended_by", "preempted_for"}

// writeSchedule writes the runs as allot's schedule, in the order they entered their queue
// (then started, then by id).
func writeSchedule(path string, runs []runRow) error {
	sort.SliceStable(runs, func(a, b int) bool {
		x, y := runs[a], runs[b]
		if x.queued != y.queued {
			return x.queued < y.queued
		}
		if x.start != y.start {
			return x.start < y.start
		}
		return x.job.ID < y.job.ID
	})
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	if err := w.Write(columns); err != nil {
		return err
	}
	for _, r := range runs {
		wait := ""
		if r.wait != nil {
			wait = strconv.FormatInt(*r.wait, 10)
		}
		row := []string{r.job.ID, r.job.Project, r.job.User, r.job.Cluster, strconv.FormatInt(r.job.GPUs, 10),
			strconv.FormatInt(r.queued, 10), strconv.FormatInt(r.start, 10), strconv.FormatInt(r.end, 10),
			r.job.Contract, wait, strconv.Itoa(r.attempt), r.endedBy, r.preemptedFor}
		if err := w.Write(row); err != nil {
			return err
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	return f.Close()
}
