package proxy

import "bytes"

// The metrics package writes a # HELP line with no text for the counters and
// gauges of a Set and for the Go runtime and process metrics; the scrape
// fills those lines in from metricHelp, so that every metric family of
// /metrics says what it counts (promtool check metrics). The metrics written
// by hand (state, limits, histograms) carry their own text.

// metricHelp is the # HELP text of each metric family the metrics package
// writes without one.
var metricHelp = map[string]string{
	"gateway_requests_total":                   "Requests ended, by family, endpoint, configured model (\"\" when none resolved) and status class.",
	"gateway_rejections_total":                 "Calls the gateway itself refused or failed, by family and reason.",
	"gateway_request_bytes_total":              "Request body bytes received, by family.",
	"gateway_response_bytes_total":             "Answer body bytes sent, by family.",
	"gateway_active_streams":                   "SSE answers being relayed now.",
	"gateway_upstream_responses_total":         "Answers of each deployment by status class, upstream failures turned into 502/504 included.",
	"gateway_tokens_total":                     "Tokens the providers reported in their answers, by caller key id, configured model and kind.",
	"gateway_store_operations_total":           "Store operations, by operation and result.",
	"gateway_trace_spans_dropped_total":        "Spans dropped because the trace export queue (tracing.queue_size) was full.",
	"gateway_trace_spans_failed_total":         "Spans whose export to the trace collector failed.",
	"gateway_accept_errors_total":              "Accepts that failed and were retried after a pause, by listener (client, admin).",
	"gateway_client_connections":               "Client connections open now, each counted with the upstream descriptor its call may need.",
	"gateway_client_connections_refused_total": "Client connections closed at once to keep file descriptors for upstream dials.",
	"gateway_upstream_connections":             "Upstream connections open now, from dial to close.",
	"gateway_admin_key_changes_total":          "Changes of callers' keys made through the admin API, by action.",
	"gateway_spend_usd_total":                  "Cost of the calls in USD, at the configured prices, by caller key id and configured model.",

	"go_sched_latencies_seconds":          "Time goroutines spent runnable before running.",
	"go_mutex_wait_seconds_total":         "Time goroutines spent blocked on a sync.Mutex or sync.RWMutex.",
	"go_gc_mark_assist_cpu_seconds_total": "CPU time goroutines spent helping the GC mark.",
	"go_gc_cpu_seconds_total":             "CPU time spent in the GC.",
	"go_gc_pauses_seconds":                "Stop-the-world pauses of the GC.",
	"go_scavenge_cpu_seconds_total":       "CPU time spent returning unused memory to the OS.",
	"go_memlimit_bytes":                   "The Go runtime's soft memory limit (GOMEMLIMIT).",
	"go_memstats_alloc_bytes":             "Bytes of allocated heap objects.",
	"go_memstats_alloc_bytes_total":       "Bytes allocated for heap objects since the process started.",
	"go_memstats_buck_hash_sys_bytes":     "Bytes of memory in profiling bucket hash tables.",
	"go_memstats_frees_total":             "Heap objects freed since the process started.",
	"go_memstats_gc_cpu_fraction":         "Fraction of the available CPU time used by the GC since the process started.",
	"go_memstats_gc_sys_bytes":            "Bytes of memory in GC metadata.",
	"go_memstats_heap_alloc_bytes":        "Bytes of allocated heap objects.",
	"go_memstats_heap_idle_bytes":         "Bytes in idle (unused) heap spans.",
	"go_memstats_heap_inuse_bytes":        "Bytes in in-use heap spans.",
	"go_memstats_heap_objects":            "Allocated heap objects.",
	"go_memstats_heap_released_bytes":     "Bytes of physical memory returned to the OS.",
	"go_memstats_heap_sys_bytes":          "Bytes of heap memory obtained from the OS.",
	"go_memstats_last_gc_time_seconds":    "When the last GC finished, in seconds since the Unix epoch.",
	"go_memstats_lookups_total":           "Pointer lookups performed by the runtime.",
	"go_memstats_mallocs_total":           "Heap objects allocated since the process started.",
	"go_memstats_mcache_inuse_bytes":      "Bytes of allocated mcache structures.",
	"go_memstats_mcache_sys_bytes":        "Bytes of memory obtained from the OS for mcache structures.",
	"go_memstats_mspan_inuse_bytes":       "Bytes of allocated mspan structures.",
	"go_memstats_mspan_sys_bytes":         "Bytes of memory obtained from the OS for mspan structures.",
	"go_memstats_next_gc_bytes":           "Heap size at which the next GC starts.",
	"go_memstats_other_sys_bytes":         "Bytes of memory in other runtime allocations.",
	"go_memstats_stack_inuse_bytes":       "Bytes in stack spans.",
	"go_memstats_stack_sys_bytes":         "Bytes of stack memory obtained from the OS.",
	"go_memstats_sys_bytes":               "Bytes of memory obtained from the OS by the Go runtime.",
	"go_cgo_calls_count":                  "Cgo calls made by the process.",
	"go_cpu_count":                        "Logical CPUs usable by the process.",
	"go_gc_duration_seconds":              "Stop-the-world pause durations of the GC.",
	"go_gc_forced_count":                  "GC cycles forced by the application.",
	"go_gomaxprocs":                       "GOMAXPROCS: the CPUs that may run Go code at once.",
	"go_goroutines":                       "Goroutines that exist now.",
	"go_threads":                          "OS threads created by the Go runtime.",
	"go_info":                             "The Go version the binary was built with.",
	"go_info_ext":                         "The compiler, GOARCH, GOOS and GOROOT the binary was built with.",

	"process_cpu_seconds_system_total":              "CPU time the process spent in the kernel.",
	"process_cpu_seconds_total":                     "CPU time the process spent, user and kernel.",
	"process_cpu_seconds_user_total":                "CPU time the process spent in user space.",
	"process_major_pagefaults_total":                "Page faults of the process that needed a disk read.",
	"process_minor_pagefaults_total":                "Page faults of the process that needed no disk read.",
	"process_num_threads":                           "OS threads of the process.",
	"process_resident_memory_bytes":                 "Resident memory of the process.",
	"process_start_time_seconds":                    "When the process started, in seconds since the Unix epoch.",
	"process_virtual_memory_bytes":                  "Virtual memory of the process.",
	"process_virtual_memory_peak_bytes":             "Peak virtual memory of the process.",
	"process_resident_memory_peak_bytes":            "Peak resident memory of the process.",
	"process_resident_memory_anon_bytes":            "Resident anonymous memory of the process.",
	"process_resident_memory_file_bytes":            "Resident file-backed memory of the process.",
	"process_resident_memory_shared_bytes":          "Resident shared memory of the process.",
	"process_io_read_bytes_total":                   "Bytes the process read, page cache included.",
	"process_io_written_bytes_total":                "Bytes the process wrote, page cache included.",
	"process_io_read_syscalls_total":                "Read system calls of the process.",
	"process_io_write_syscalls_total":               "Write system calls of the process.",
	"process_io_storage_read_bytes_total":           "Bytes the process read from storage.",
	"process_io_storage_written_bytes_total":        "Bytes the process wrote to storage.",
	"process_open_fds":                              "File descriptors the process holds open.",
	"process_max_fds":                               "The process' limit of open file descriptors.",
	"process_pressure_cpu_waiting_seconds_total":    "Time the process' cgroup waited for CPU (pressure stall information).",
	"process_pressure_cpu_stalled_seconds_total":    "Time all tasks of the process' cgroup stalled on CPU (pressure stall information).",
	"process_pressure_io_waiting_seconds_total":     "Time the process' cgroup waited for I/O (pressure stall information).",
	"process_pressure_io_stalled_seconds_total":     "Time all tasks of the process' cgroup stalled on I/O (pressure stall information).",
	"process_pressure_memory_waiting_seconds_total": "Time the process' cgroup waited for memory (pressure stall information).",
	"process_pressure_memory_stalled_seconds_total": "Time all tasks of the process' cgroup stalled on memory (pressure stall information).",
}

// appendHelpFilled appends src to dst with each # HELP line that has no text
// given its metricHelp text, when there is one.
func appendHelpFilled(dst, src []byte) []byte {
	for len(src) > 0 {
		line := src
		if i := bytes.IndexByte(src, '\n'); i >= 0 {
			line = src[:i+1]
		}
		src = src[len(line):]
		name, ok := bytes.CutPrefix(bytes.TrimSuffix(line, []byte("\n")), []byte("# HELP "))
		if help := metricHelp[string(name)]; ok && help != "" && bytes.IndexByte(name, ' ') < 0 {
			dst = append(dst, "# HELP "...)
			dst = append(dst, name...)
			dst = append(dst, ' ')
			dst = append(dst, help...)
			dst = append(dst, '\n')
			continue
		}
		dst = append(dst, line...)
	}
	return dst
}
