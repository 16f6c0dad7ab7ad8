package main

import (
	"container/heap"
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"time"
	_ "unsafe" // for go:linkname

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/controller/core"
	"sigs.k8s.io/kueue/pkg/scheduler"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption/fairsharing"
	"sigs.k8s.io/kueue/pkg/util/routine"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"
	"sigs.k8s.io/kueue/pkg/util/wait"
	"sigs.k8s.io/kueue/pkg/workload"
)

// One scheduling cycle: Kueue's `(*Scheduler).schedule`, which `Start` runs in a loop.
//
//go:linkname schedule sigs.k8s.io/kueue/pkg/scheduler.(*Scheduler).schedule
func schedule(s *scheduler.Scheduler, ctx context.Context) wait.SpeedSignal

// How the scheduler runs an admission's API update (in a goroutine of its own, by default).
//
//go:linkname setAdmissionRoutineWrapper sigs.k8s.io/kueue/pkg/scheduler.(*Scheduler).setAdmissionRoutineWrapper
func setAdmissionRoutineWrapper(s *scheduler.Scheduler, wrapper routine.Wrapper)

// inline runs an admission's API update at once, so that a cycle's effects are all known
// when it returns.
type inline struct{}

func (inline) Run(f func()) { f() }

// The namespace every workload is created in: ClusterQueues' namespace selectors are
// opened to all namespaces (allot's simulator does not model namespaces either).
const namespace = "allot-oracle"

// The UID in a preemption's message (pkg/scheduler/preemption/preemption.go, preemptionMessage).
var preemptorUID = regexp.MustCompile(`\(UID: ([^,]+),`)

// The instants whose cycles are logged (--log-between); none by default.
var logWindow = [2]int64{1, 0}

var logVerbosity = 3

// logger writes Kueue's log lines of verbosity 3 and below to stderr, each with its instant.
func logger(now int64) logr.Logger {
	return funcr.New(func(prefix, args string) {
		fmt.Fprintf(os.Stderr, "t=%d %s %s\n", now, prefix, args)
	}, funcr.Options{Verbosity: logVerbosity})
}

type stats struct {
	workloads, admissions, preemptions, cycles, stalled int
}

// simulation is one cluster's Kueue.
type simulation struct {
	ctx       context.Context
	clock     *testingclock.FakeClock
	client    client.Client
	queues    *qcache.Manager
	requeuer  interface{ ProcessRequeues(context.Context) int }
	cache     *schdcache.Cache
	scheduler *scheduler.Scheduler
	workloads *core.WorkloadReconciler
	resource  corev1.ResourceName
	maxCycles int
	// The ClusterQueues as the objects give them.
	clusterQueues []*kueue.ClusterQueue

	// What the informer last handed Kueue of each workload, and the keys changed since.
	known   map[types.NamespacedName]*kueue.Workload
	touched []types.NamespacedName
	// A workload was evicted a second time at the current instant.
	circle bool
}

func newSimulation(set *objectSet, cfg configapi.Configuration, resourceName string, maxCycles int) (*simulation, error) {
	if cfg.AdmissionFairSharing != nil {
		return nil, fmt.Errorf("Admission Fair Sharing is not supported by the oracle")
	}
	ctx := context.Background()
	sim := &simulation{
		ctx:       ctx,
		clock:     testingclock.NewFakeClock(time.Unix(0, 0)),
		resource:  corev1.ResourceName(resourceName),
		maxCycles: maxCycles,
		known:     map[types.NamespacedName]*kueue.Workload{},
	}
	touch := func(obj client.Object) {
		if _, ok := obj.(*kueue.Workload); ok {
			sim.touched = append(sim.touched, client.ObjectKeyFromObject(obj))
		}
	}
	// The client of Kueue's unit tests (pkg/util/testing, NewClientBuilder), with client-go's
	// plain object tracker: the default one rebuilds a REST mapper on every patch.
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kueue.AddToScheme(scheme))
	tracker := clienttesting.NewObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder())
	sim.client = utiltesting.NewClientBuilder().
		WithScheme(scheme).
		WithObjectTracker(tracker).
		WithStatusSubresource(&kueue.Workload{}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				err := utiltesting.TreatSSAAsStrategicMerge(ctx, c, sub, obj, patch, opts...)
				if err == nil {
					touch(obj)
				}
				return err
			},
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				err := c.SubResource(sub).Update(ctx, obj, opts...)
				if err == nil {
					touch(obj)
				}
				return err
			},
		}).
		Build()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{corev1.LabelMetadataName: namespace}}}
	if err := sim.client.Create(ctx, ns); err != nil {
		return nil, err
	}

	expectationsStore := preemptexpectations.New()
	cacheOptions := []schdcache.Option{}
	if cfg.FairSharing != nil {
		cacheOptions = append(cacheOptions, schdcache.WithFairSharing(fairsharing.Enabled(cfg.FairSharing)))
	}
	sim.cache = schdcache.New(sim.client, cacheOptions...)
	queues, requeuer := qcache.NewManagerForUnitTestsWithRequeuer(sim.client, sim.cache,
		qcache.WithPreemptionExpectations(expectationsStore), qcache.WithClock(sim.clock))
	sim.queues, sim.requeuer = queues, requeuer
	recorder := &record.FakeRecorder{} // no channel: events dropped
	sim.scheduler = scheduler.New(sim.queues, sim.cache, sim.client, recorder,
		scheduler.WithFairSharing(cfg.FairSharing),
		scheduler.WithClock(nil, sim.clock),
		scheduler.WithPreemptionExpectations(expectationsStore))
	setAdmissionRoutineWrapper(sim.scheduler, inline{})
	sim.workloads = core.NewWorkloadReconciler(sim.client, sim.queues, sim.cache, recorder,
		core.WithPreemptionExpectations(expectationsStore))

	log := logr.Discard()
	for _, rf := range set.flavors {
		sim.cache.AddOrUpdateResourceFlavor(log, rf)
	}
	for _, cohort := range set.cohorts {
		if err := sim.cache.AddOrUpdateCohort(cohort); err != nil {
			return nil, fmt.Errorf("Cohort %q: %w", cohort.Name, err)
		}
		sim.queues.AddOrUpdateCohort(ctx, cohort)
	}
	for _, cq := range set.queues {
		// Every namespace may use every ClusterQueue (see `namespace`).
		cq.Spec.NamespaceSelector = &metav1.LabelSelector{}
		if err := sim.cache.AddClusterQueue(ctx, cq); err != nil {
			return nil, fmt.Errorf("ClusterQueue %q: %w", cq.Name, err)
		}
		if err := sim.queues.AddClusterQueue(ctx, cq); err != nil {
			return nil, fmt.Errorf("ClusterQueue %q: %w", cq.Name, err)
		}
		if err := sim.client.Create(ctx, cq); err != nil {
			return nil, err
		}
		sim.clusterQueues = append(sim.clusterQueues, cq)
		lq := &kueue.LocalQueue{
			ObjectMeta: metav1.ObjectMeta{Name: cq.Name, Namespace: namespace},
			Spec:       kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(cq.Name)},
		}
		if err := sim.client.Create(ctx, lq); err != nil {
			return nil, err
		}
		if err := sim.queues.AddLocalQueue(ctx, lq); err != nil {
			return nil, fmt.Errorf("LocalQueue %q: %w", lq.Name, err)
		}
		if err := sim.cache.AddLocalQueue(lq); err != nil {
			return nil, fmt.Errorf("LocalQueue %q: %w", lq.Name, err)
		}
	}
	for _, pc := range set.priority {
		if err := sim.client.Create(ctx, pc); err != nil {
			return nil, err
		}
	}
	return sim, nil
}

// A job as the simulation holds it.
type state struct {
	job       *job
	key       types.NamespacedName
	remaining int64 // seconds of work left
	running   bool
	start     int64
	queued    int64 // when its current wait began
	waited    int64
	attempt   int
	evictedAt int64 // the instant of its last eviction
	runs      []runRow
}

// Finish events, by time then job (in submission order).
type finish struct {
	at    int64
	index int
	run   int // the attempt it ends; stale when the job was preempted since
}

type finishes []finish

func (f finishes) Len() int { return len(f) }
func (f finishes) Less(a, b int) bool {
	if f[a].at != f[b].at {
		return f[a].at < f[b].at
	}
	return f[a].index < f[b].index
}
func (f finishes) Swap(a, b int) { f[a], f[b] = f[b], f[a] }
func (f *finishes) Push(x any)   { *f = append(*f, x.(finish)) }
func (f *finishes) Pop() any {
	old := *f
	x := old[len(old)-1]
	*f = old[:len(old)-1]
	return x
}

// replay runs the jobs (in submission order) to their ends and gives their runs.
func (sim *simulation) replay(jobs []*job) ([]runRow, *stats, error) {
	s := &stats{workloads: len(jobs)}
	states := make([]*state, len(jobs))
	byKey := map[types.NamespacedName]int{}
	for i, j := range jobs {
		key := types.NamespacedName{Namespace: namespace, Name: fmt.Sprintf("w%09d", i)}
		states[i] = &state{job: j, key: key, remaining: j.Work, evictedAt: -1 << 62}
		byKey[key] = i
	}
	var due finishes
	next := 0
	// After an instant cut short with no job left running, the next second is an instant of
	// its own, where Kueue's cycles go on (a running job's end is an instant anyway; without
	// one, a preemptor whose victims are gone would wait for the next submission, or for
	// ever). The policy does the same.
	wake := int64(-1)
	lastReport := time.Now()
	for next < len(jobs) || len(due) > 0 || wake >= 0 {
		// Ends of runs since preempted are not instants of their own.
		for len(due) > 0 && (!states[due[0].index].running || states[due[0].index].attempt != due[0].run) {
			heap.Pop(&due)
		}
		if next == len(jobs) && len(due) == 0 && wake < 0 {
			break
		}
		now := int64(1<<62 - 1)
		if next < len(jobs) {
			now = jobs[next].Submit
		}
		if len(due) > 0 && due[0].at < now {
			now = due[0].at
		}
		waking := wake >= 0 && wake <= now
		if waking {
			now, wake = wake, -1
			if err := sim.preemption(false); err != nil {
				return nil, nil, err
			}
		}
		sim.clock.SetTime(time.Unix(now, 0))
		if time.Since(lastReport) > 10*time.Second {
			lastReport = time.Now()
			fmt.Fprintf(os.Stderr, "kueue-oracle: %d of %d workloads submitted, %d preemptions, %d instants cut short\n", next, len(jobs), s.preemptions, s.stalled)
		}
		// Jobs whose work is done end first, then the submissions of the instant.
		for len(due) > 0 && due[0].at == now {
			f := heap.Pop(&due).(finish)
			st := states[f.index]
			if !st.running || st.attempt != f.run {
				continue
			}
			st.running = false
			st.runs = append(st.runs, sim.run(st, now, "finished", ""))
			// The job's whole wait goes on its first run.
			st.runs[0].wait = ptr.To(st.waited)
			wl, err := sim.get(st.key)
			if err != nil {
				return nil, nil, err
			}
			if err := workload.Finish(sim.ctx, sim.client, wl, kueue.WorkloadFinishedReasonSucceeded, "done", sim.clock); err != nil {
				return nil, nil, fmt.Errorf("finishing %s: %w", st.job.ID, err)
			}
		}
		for next < len(jobs) && jobs[next].Submit == now {
			st := states[next]
			st.queued = now
			if err := sim.submit(st, int64(next)); err != nil {
				return nil, nil, err
			}
			next++
		}
		// Kueue's cycles at this instant, each after the informer has handed Kueue what
		// the last one changed, until none admits or evicts and no head was set aside.
		cycles, before := 0, 0
		sim.circle = false
		for {
			progress, err := sim.inform(states, byKey, &due, s, now)
			if err != nil {
				return nil, nil, err
			}
			sim.requeuer.ProcessRequeues(sim.ctx)
			if sim.circle || cycles >= sim.maxCycles {
				// Preemption in circles (a workload evicted twice in one instant), or
				// cycles without end: the instant is cut short, and counted.
				s.stalled++
				if !slices.ContainsFunc(states, func(st *state) bool { return st.running }) {
					wake = now + 1
				}
				break
			}
			waiting := sim.pending()
			if waiting == 0 || (cycles > 0 && !progress && waiting >= before) {
				break
			}
			before = waiting
			ctx := sim.ctx
			if logWindow[0] <= now && now <= logWindow[1] {
				ctx = ctrl.LoggerInto(ctx, logger(now))
				ctrl.SetLogger(logger(now))
				sim.logQuota(now)
			} else if logWindow[0] <= logWindow[1] {
				ctrl.SetLogger(logr.Discard())
			}
			schedule(sim.scheduler, ctx)
			cycles++
			s.cycles++
		}
		if waking {
			if err := sim.preemption(true); err != nil {
				return nil, nil, err
			}
		}
	}
	var out []runRow
	for _, st := range states {
		if st.running {
			return nil, nil, fmt.Errorf("job %s still running at the end", st.job.ID)
		}
		out = append(out, st.runs...)
	}
	return out, s, nil
}

// preemption gives Kueue's cache the ClusterQueues' preemption policies as the objects set
// them (on), or every one Never (off): the second after an instant cut short with no job
// left running is scheduled without preemption, else the circle could go on for ever. The
// queue manager is not told (it would bring back the inadmissible workloads).
func (sim *simulation) preemption(on bool) error {
	log := ctrl.LoggerFrom(sim.ctx)
	for _, cq := range sim.clusterQueues {
		if !on {
			cq = cq.DeepCopy()
			cq.Spec.Preemption = &kueue.ClusterQueuePreemption{
				ReclaimWithinCohort: kueue.PreemptionPolicyNever,
				WithinClusterQueue:  kueue.PreemptionPolicyNever,
			}
		}
		if err := sim.cache.UpdateClusterQueue(log, cq); err != nil {
			return fmt.Errorf("ClusterQueue %q: %w", cq.Name, err)
		}
	}
	return nil
}

// logQuota writes each ClusterQueue's usage and what it has available, for --log-between.
func (sim *simulation) logQuota(now int64) {
	snapshot, err := sim.cache.Snapshot(sim.ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "t=%d snapshot: %v\n", now, err)
		return
	}
	for name, cq := range snapshot.ClusterQueues() {
		for fr, used := range cq.ResourceNode.Usage {
			fmt.Fprintf(os.Stderr, "t=%d quota %s: usage %d, available %d, workloads %d\n", now, name, used, cq.Available(fr), len(cq.Workloads))
		}
		for _, info := range sim.queues.PendingWorkloadsInfo(name) {
			fmt.Fprintf(os.Stderr, "t=%d   pending %s: last assignment %+v, requests %+v\n", now, info.Obj.Name, info.LastAssignment, info.TotalRequests)
		}
	}
}

// pending counts the workloads queued to be scheduled (not those set aside as inadmissible).
func (sim *simulation) pending() int {
	n := 0
	for _, queued := range sim.queues.Dump() {
		n += len(queued)
	}
	return n
}

// submit creates the job's Workload, as its job controller would.
func (sim *simulation) submit(st *state, index int64) error {
	j := st.job
	wl := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{
			Name:              st.key.Name,
			Namespace:         namespace,
			UID:               types.UID(fmt.Sprintf("%09d", index)),
			CreationTimestamp: metav1.NewTime(time.Unix(j.Submit, 0)),
		},
		Spec: kueue.WorkloadSpec{
			QueueName: kueue.LocalQueueName(j.ClusterQueue),
			Priority:  ptr.To(j.Priority),
			PodSets: []kueue.PodSet{{
				Name:  kueue.DefaultPodSetName,
				Count: 1,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "job",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						sim.resource: *resource.NewQuantity(j.GPUs, resource.DecimalSI),
					}},
				}}}},
			}},
		},
	}
	if err := sim.client.Create(sim.ctx, wl); err != nil {
		return fmt.Errorf("creating the workload of %s: %w", j.ID, err)
	}
	created, err := sim.get(st.key)
	if err != nil {
		return err
	}
	sim.known[st.key] = created
	sim.workloads.Create(event.TypedCreateEvent[*kueue.Workload]{Object: created.DeepCopy()})
	return nil
}

func (sim *simulation) get(key types.NamespacedName) (*kueue.Workload, error) {
	wl := &kueue.Workload{}
	if err := sim.client.Get(sim.ctx, key, wl); err != nil {
		return nil, fmt.Errorf("workload %s: %w", key, err)
	}
	return wl, nil
}

// inform hands Kueue every workload changed since the last call, as its informer would,
// and plays the job controller's part on each: a job starts when its workload is admitted,
// and stops when it is evicted (its quota then released, as Kueue's job reconciler
// releases it). Says whether a job started or stopped.
func (sim *simulation) inform(states []*state, byKey map[types.NamespacedName]int, due *finishes, s *stats, now int64) (bool, error) {
	changed := false
	for len(sim.touched) > 0 {
		key := sim.touched[0]
		sim.touched = sim.touched[1:]
		wl, err := sim.get(key)
		if err != nil {
			return false, err
		}
		old := sim.known[key]
		if old != nil && old.ResourceVersion == wl.ResourceVersion {
			continue
		}
		sim.known[key] = wl
		sim.workloads.Update(event.TypedUpdateEvent[*kueue.Workload]{ObjectOld: old.DeepCopy(), ObjectNew: wl.DeepCopy()})
		index := byKey[key]
		st := states[index]
		switch {
		case workload.IsFinished(wl):
		case workload.IsEvicted(wl) && workload.HasQuotaReservation(wl):
			evictedCond := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted)
			// The job controller stops the job and releases its quota
			// (pkg/controller/jobframework/reconciler.go, ReconcileGenericJob, "handle eviction").
			if st.running {
				st.running = false
				by := ""
				if m := preemptorUID.FindStringSubmatch(evictedCond.Message); m != nil {
					if i, err := strconv.Atoi(m[1]); err == nil && i < len(states) {
						by = states[i].job.ID
					}
				}
				st.runs = append(st.runs, sim.run(st, now, "preempted", by))
				if st.job.Resumable {
					st.remaining -= now - st.start
				} else {
					st.remaining = st.job.Work
				}
				if st.evictedAt == now && st.attempt > 0 {
					sim.circle = true
				}
				st.evictedAt = now
				st.queued = now
				s.preemptions++
				changed = true
			}
			evicted, reason := evictedCond.Message, evictedCond.Reason
			copyWl := wl.DeepCopy()
			err := workload.PatchAdmissionStatus(sim.ctx, sim.client, copyWl, sim.clock, func(w *kueue.Workload) (bool, error) {
				requeued := reason == kueue.WorkloadEvictedByPreemption || reason == kueue.WorkloadEvictedDueToNodeFailures
				updated := workload.SetRequeuedCondition(w, reason, evicted, requeued)
				if workload.UnsetQuotaReservationWithCondition(w, "Pending", evicted, sim.clock.Now()) {
					updated = true
				}
				return updated, nil
			})
			if err != nil {
				return false, fmt.Errorf("releasing the quota of %s: %w", st.job.ID, err)
			}
		case workload.IsAdmitted(wl) && !st.running:
			st.running = true
			st.start = now
			st.waited += now - st.queued
			st.attempt++
			s.admissions++
			heap.Push(due, finish{at: now + st.remaining, index: index, run: st.attempt})
			changed = true
		}
	}
	return changed, nil
}

// run is the run of `st` that ends now.
func (sim *simulation) run(st *state, now int64, endedBy, preemptedFor string) runRow {
	return runRow{job: st.job, queued: st.queued, start: st.start, end: now, attempt: st.attempt, endedBy: endedBy, preemptedFor: preemptedFor}
}
