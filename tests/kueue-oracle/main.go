// Command kueue-oracle replays workloads through Kueue's own scheduling code in simulated
// time and writes the schedule it made, in the columns of `allot replay simulate
// --schedule`. It is the oracle the `kueue` policy of allot's simulator is measured
// against (docs/verifier.md, "The Kueue oracle").
//
// Kueue's scheduler, cache, queue manager and workload event handlers run as they run in
// kueue's controller manager (the version go.mod pins), over controller-runtime's fake
// client in place of the API server, as Kueue's own scheduler tests run them. This program
// plays the parts that are not Kueue's: the informer (every change to a Workload handed to
// Kueue's workload event handlers), the clock (simulated, set to each instant), and the job
// controller (a Workload created at its job's submission, marked Finished when its work is
// done, and after an eviction stopped and its quota released, as Kueue's job reconciler
// does, so that Kueue requeues it).
//
// Usage:
//
//	kueue-oracle --objects CLUSTER=DIR [--objects CLUSTER=DIR ...] [--config FILE]
//	    --workloads FILE --schedule OUT.csv [--resource nvidia.com/gpu]
//
// The workloads file is JSON Lines, one job a line, in submission order, as `allot replay
// simulate --kueue-workloads` writes it.
//
//	kueue-oracle compare A.csv B.csv [C.csv ...]
//
// compares schedule A with each other one, job by job, and prints how they agree as JSON.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/kueue/pkg/features"
)

type objectDirs map[string]string

func (o objectDirs) String() string { return fmt.Sprint(map[string]string(o)) }

func (o objectDirs) Set(v string) error {
	cluster, dir, ok := strings.Cut(v, "=")
	if !ok || cluster == "" || dir == "" {
		return fmt.Errorf("expected CLUSTER=DIR, got %q", v)
	}
	if _, seen := o[cluster]; seen {
		return fmt.Errorf("cluster %q given twice", cluster)
	}
	o[cluster] = dir
	return nil
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "compare" {
		if err := compare(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "kueue-oracle:", err)
			os.Exit(1)
		}
		return
	}
	objects := objectDirs{}
	flag.Var(objects, "objects", "CLUSTER=DIR: the Kueue objects of an allot cluster (repeatable)")
	config := flag.String("config", "", "Kueue's Configuration (or the ConfigMap holding it)")
	workloads := flag.String("workloads", "", "the workloads, JSON Lines (required)")
	schedule := flag.String("schedule", "", "where to write the schedule, CSV (required)")
	resource := flag.String("resource", "", "the GPU resource's name (default: the one resource the ClusterQueues cover)")
	profile := flag.String("cpuprofile", "", "write a CPU profile to FILE")
	logBetween := flag.String("log-between", "", "FROM,TO: log Kueue's decisions (verbosity 3) at the instants FROM to TO, for debugging")
	maxCycles := flag.Int("max-cycles", 10000, "scheduling cycles one instant may run before it is cut short (a workload evicted twice in one instant cuts it short too)")
	flag.Parse()
	if len(objects) == 0 || *workloads == "" || *schedule == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "kueue-oracle:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	ctrl.SetLogger(logr.Discard())
	// Kueue writes a Workload's status with server-side apply, which on an API server drops
	// the fields its manager no longer sends (a released admission). The fake client cannot
	// apply (Kueue's tests turn apply into a strategic merge, which keeps such fields), so
	// the oracle has Kueue send merge patches of the change instead: the same result an API
	// server gives its apply.
	if err := utilfeature.DefaultMutableFeatureGate.Set(string(features.WorkloadRequestUseMergePatch) + "=true"); err != nil {
		fmt.Fprintln(os.Stderr, "kueue-oracle:", err)
		os.Exit(1)
	}
	if *logBetween != "" {
		from, to, ok := strings.Cut(*logBetween, ",")
		a, errA := strconv.ParseInt(from, 10, 64)
		b, errB := strconv.ParseInt(to, 10, 64)
		if !ok || errA != nil || errB != nil {
			fmt.Fprintln(os.Stderr, "kueue-oracle: --log-between: expected FROM,TO (seconds)")
			os.Exit(2)
		}
		logWindow = [2]int64{a, b}
		if v, err := strconv.Atoi(os.Getenv("KUEUE_ORACLE_V")); err == nil {
			logVerbosity = v
		}
	}
	if err := run(objects, *config, *workloads, *schedule, *resource, *maxCycles); err != nil {
		fmt.Fprintln(os.Stderr, "kueue-oracle:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func run(objects objectDirs, configPath, workloadsPath, schedulePath, resource string, maxCycles int) error {
	cfg, err := loadConfiguration(configPath)
	if err != nil {
		return err
	}
	jobs, err := readWorkloads(workloadsPath)
	if err != nil {
		return err
	}
	byCluster := map[string][]*job{}
	for _, j := range jobs {
		if _, ok := objects[j.Cluster]; !ok {
			return fmt.Errorf("workload %q is of cluster %q, which no --objects names", j.ID, j.Cluster)
		}
		byCluster[j.Cluster] = append(byCluster[j.Cluster], j)
	}
	var runs []runRow
	summaries := map[string]*stats{}
	for cluster, dir := range objects {
		set, err := readObjects(dir)
		if err != nil {
			return err
		}
		gpu := resource
		if gpu == "" {
			if gpu, err = set.coveredResource(); err != nil {
				return fmt.Errorf("cluster %q: %w", cluster, err)
			}
		}
		sim, err := newSimulation(set, cfg, gpu, maxCycles)
		if err != nil {
			return fmt.Errorf("cluster %q: %w", cluster, err)
		}
		got, s, err := sim.replay(byCluster[cluster])
		if err != nil {
			return fmt.Errorf("cluster %q: %w", cluster, err)
		}
		runs = append(runs, got...)
		summaries[cluster] = s
	}
	if err := writeSchedule(schedulePath, runs); err != nil {
		return err
	}
	for cluster, s := range summaries {
		fmt.Fprintf(os.Stderr, "kueue-oracle: cluster %s: %d workloads, %d admissions, %d preemptions, %d cycles, %d instants cut short\n",
			cluster, s.workloads, s.admissions, s.preemptions, s.cycles, s.stalled)
	}
	return nil
}
