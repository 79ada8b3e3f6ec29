// Command benchclient times Filter and Score calls against a running sidecar
// the way kube-scheduler makes them, alternating the two front ends call by
// call: the HTTP extender verbs (encoding/json of ExtenderArgs with the whole
// Pod, as kube-scheduler's HTTPExtender does) and the gRPC contract (the shim's
// PodRef and node names). Each call encodes its request and decodes its reply.
// bench/grpc_verbs.py runs it; it prints one JSON object of latencies (ms).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	pb "pyextender.io/shim/gen/pyextender/v1"
)

func main() {
	base := flag.String("http", "", "extender URL, e.g. http://127.0.0.1:8888")
	target := flag.String("grpc", "", "gRPC target, e.g. unix:///tmp/sched.sock")
	podFile := flag.String("pod", "", "the pod as JSON")
	nodes := flag.Int("nodes", 1000, "node names node-00000 ... to send")
	requests := flag.Int("requests", 1000, "measured calls per verb and front end")
	serverPid := flag.Int("server-pid", 0, "the sidecar's process, for its CPU per call (0: not measured)")
	cycleSocket := flag.String("cycle-socket", "", "the sidecar's cycle socket: also time the two calls there")
	flag.Parse()
	if err := run(*base, *target, *podFile, *cycleSocket, *nodes, *requests, *serverPid); err != nil {
		fmt.Fprintln(os.Stderr, "benchclient:", err)
		os.Exit(1)
	}
}

func run(base, target, podFile, cycleSocket string, n, requests, serverPid int) error {
	raw, err := os.ReadFile(podFile)
	if err != nil {
		return err
	}
	pod := &v1.Pod{}
	if err := json.Unmarshal(raw, pod); err != nil {
		return fmt.Errorf("%s: %w", podFile, err)
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("node-%05d", i)
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := pb.NewSchedulerClient(conn)
	ref := &pb.PodRef{Uid: string(pod.UID), ResourceVersion: pod.ResourceVersion, Namespace: pod.Namespace, Name: pod.Name}
	web := &http.Client{Timeout: 10 * time.Second}
	args := extenderv1.ExtenderArgs{Pod: pod, NodeNames: &names}

	post := func(verb string, out any) error {
		body, err := json.Marshal(&args)
		if err != nil {
			return err
		}
		resp, err := web.Post(base+"/"+verb, "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: HTTP %d: %s", verb, resp.StatusCode, data)
		}
		return json.Unmarshal(data, out)
	}
	calls := map[string][2]func() error{
		"filter": {
			func() error { return post("filter", &extenderv1.ExtenderFilterResult{}) },
			func() error {
				_, err := client.Filter(context.Background(), &pb.FilterRequest{Pod: ref, NodeNames: names})
				return err
			},
		},
		"score": {
			func() error { return post("prioritize", &extenderv1.HostPriorityList{}) },
			func() error {
				_, err := client.Score(context.Background(), &pb.ScoreRequest{Pod: ref, NodeNames: names})
				return err
			},
		},
	}
	// the shim's calls before Reserve, per pod: Filter then Score (until it asked
	// Filter for the scores too), against the one Filter call with_scores
	calls["cycle"] = [2]func() error{
		func() error {
			if _, err := client.Filter(context.Background(), &pb.FilterRequest{Pod: ref, NodeNames: names}); err != nil {
				return err
			}
			_, err := client.Score(context.Background(), &pb.ScoreRequest{Pod: ref, NodeNames: names})
			return err
		},
		func() error {
			_, err := client.Filter(context.Background(), &pb.FilterRequest{Pod: ref, NodeNames: names, WithScores: true})
			return err
		},
	}
	fronts := map[string][2]string{
		"filter": {"http", "grpc"}, "score": {"http", "grpc"}, "cycle": {"two_calls", "one_call"},
	}
	out := map[string]float64{}
	for _, verb := range []string{"filter", "score", "cycle"} {
		var lat [2][]float64
		for i := 0; i < requests+requests/10; i++ {
			for front, call := range calls[verb] {
				t0 := time.Now()
				if err := call(); err != nil {
					return err
				}
				if i >= requests/10 { // the first tenth warms up
					lat[front] = append(lat[front], float64(time.Since(t0).Microseconds())/1000)
				}
			}
		}
		for front, name := range fronts[verb] {
			sort.Float64s(lat[front])
			out[verb+"_"+name+"_p50_ms"] = percentile(lat[front], 50)
			out[verb+"_"+name+"_p99_ms"] = percentile(lat[front], 99)
		}
	}
	if err := streamVsUnary(client, ref, names, requests, serverPid, cycleSocket, out); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// streamVsUnary times the shim's two calls per pod, Filter (with scores) and
// Reserve, as unary calls, as messages on one Cycle stream and (with socket set)
// as the same messages on the cycle socket, in alternating blocks, with the
// sidecar's CPU and context switches per pod (all its threads) when serverPid is set.
func streamVsUnary(client pb.SchedulerClient, ref *pb.PodRef, names []string, requests, serverPid int, socket string, out map[string]float64) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := client.Cycle(ctx)
	if err != nil {
		return err
	}
	filter := &pb.FilterRequest{Pod: ref, NodeNames: names, WithScores: true}
	reserve := &pb.ReserveRequest{Pod: ref, NodeName: names[0]}
	var seq uint64
	exchange := func(send func(*pb.CycleRequest) error, recv func() (*pb.CycleResponse, error), req *pb.CycleRequest) error {
		seq++
		req.Seq = seq
		if err := send(req); err != nil {
			return err
		}
		reply, err := recv()
		if err == nil && reply.GetRefusedCode() != 0 {
			err = fmt.Errorf("refused (code %d): %s", reply.GetRefusedCode(), reply.GetRefusedMessage())
		}
		if err == nil && reply.GetSeq() != seq {
			err = fmt.Errorf("Cycle answered %d to %d", reply.GetSeq(), seq)
		}
		return err
	}
	pair := func(send func(*pb.CycleRequest) error, recv func() (*pb.CycleResponse, error)) func() error {
		return func() error {
			if err := exchange(send, recv, &pb.CycleRequest{Call: &pb.CycleRequest_Filter{Filter: filter}}); err != nil {
				return err
			}
			return exchange(send, recv, &pb.CycleRequest{Call: &pb.CycleRequest_Reserve{Reserve: reserve}})
		}
	}
	names3 := []string{"unary", "stream"}
	ways := []func() error{
		func() error {
			if _, err := client.Filter(ctx, filter); err != nil {
				return err
			}
			_, err := client.Reserve(ctx, reserve)
			return err
		},
		pair(stream.Send, stream.Recv),
	}
	if socket != "" {
		conn, err := net.Dial("unix", socket)
		if err != nil {
			return err
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		var buf []byte
		send := func(req *pb.CycleRequest) error {
			buf = protowire.AppendVarint(buf[:0], uint64(proto.Size(req)))
			if buf, err = (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(buf, req); err != nil {
				return err
			}
			_, err := conn.Write(buf)
			return err
		}
		recv := func() (*pb.CycleResponse, error) {
			n, err := binary.ReadUvarint(r)
			if err != nil {
				return nil, err
			}
			body := make([]byte, n)
			if _, err := io.ReadFull(r, body); err != nil {
				return nil, err
			}
			reply := &pb.CycleResponse{}
			return reply, proto.Unmarshal(body, reply)
		}
		ways = append(ways, pair(send, recv))
		names3 = append(names3, "socket")
	}
	const block = 50
	lat := make([][]float64, len(ways))
	cpu := make([]time.Duration, len(ways))
	switches := make([]int64, len(ways))
	for i := 0; i < requests+requests/10; i += block {
		for way, call := range ways {
			before, beforeSw := processCPU(serverPid), processSwitches(serverPid)
			for j := 0; j < block; j++ {
				t0 := time.Now()
				if err := call(); err != nil {
					return fmt.Errorf("%s: %w", names3[way], err)
				}
				if i >= requests/10 {
					lat[way] = append(lat[way], float64(time.Since(t0).Microseconds())/1000)
				}
			}
			if i >= requests/10 {
				cpu[way] += processCPU(serverPid) - before
				switches[way] += processSwitches(serverPid) - beforeSw
			}
		}
	}
	for way, name := range names3 {
		sort.Float64s(lat[way])
		out["pod_calls_"+name+"_p50_ms"] = percentile(lat[way], 50)
		out["pod_calls_"+name+"_p99_ms"] = percentile(lat[way], 99)
		if serverPid > 0 && len(lat[way]) > 0 {
			out["pod_calls_"+name+"_server_cpu_us"] = float64(cpu[way].Microseconds()) / float64(len(lat[way]))
			out["pod_calls_"+name+"_server_switches"] = float64(switches[way]) / float64(len(lat[way]))
		}
	}
	return nil
}

// processSwitches is the context switches (voluntary and not) of the process's
// threads so far (/proc/PID/task/*/status); 0 without a pid.
func processSwitches(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	var total int64
	for _, path := range tasks {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "voluntary_ctxt_switches:") || strings.HasPrefix(line, "nonvoluntary_ctxt_switches:") {
				var n int64
				if _, err := fmt.Sscan(strings.TrimSpace(line[strings.Index(line, ":")+1:]), &n); err == nil {
					total += n
				}
			}
		}
	}
	return total
}

// processCPU is the CPU time the process has used so far, summed over its
// threads (/proc/PID/task/*/schedstat, nanoseconds); 0 without a pid.
func processCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var total time.Duration
	for _, path := range tasks {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // the thread ended
		}
		var ns int64
		if _, err := fmt.Sscan(string(data), &ns); err == nil {
			total += time.Duration(ns)
		}
	}
	return total
}

// percentile of sorted values, nearest rank.
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q/100*float64(len(sorted))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}
