package main

// The consumer's NFD path (docs/operations.md, "The TAS lab"): for each described Node
// with private labels, one NodeFeature (nfd.k8s-sigs.io/v1alpha1) in the worker
// namespace, named gpustack-topology-<FNV-1a 64 of (source UID, NUL, Node name)>,
// labelled with the Node's name and the source's UID, controlled by the TopologySource,
// spec.labels = the snapshot's labels without the standard keys (topology.kubernetes.io/*,
// kubernetes.io/*, which must already be on the Node); the source's NodeFeatures of Nodes
// no longer described are deleted. nfd-master applies them; the labeler waits until every
// such Node carries exactly its labels (nfd.node.kubernetes.io/feature-labels lists them),
// then writes topology.gpustack.ai/profile on the Node itself, derived from the labels
// the Node now carries, as the consumer's Node controller does.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"
)

const (
	workerNamespace = "gpustack-system"
	nodeNameLabel   = "nfd.node.kubernetes.io/node-name"
	sourceUIDLabel  = "topology.gpustack.ai/source-uid"
	featureLabels   = "nfd.node.kubernetes.io/feature-labels"
	fieldManager    = "gpustack-topology"
	nodeFeatures    = "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/" + workerNamespace + "/nodefeatures"
)

type kube struct {
	base, token string
	cl          *http.Client
}

func (a *kube) do(method, path, ctype string, body any) ([]byte, int, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		return nil, 0, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := a.cl.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode/100 != 2 {
		return msg, resp.StatusCode, errors.New(resp.Status + ": " + string(bytes.TrimSpace(msg[:min(len(msg), 512)])))
	}
	return msg, resp.StatusCode, nil
}

func (a *kube) mergePatchNode(name string, labels map[string]string) error {
	_, _, err := a.do(http.MethodPatch, "/api/v1/nodes/"+name, "application/merge-patch+json",
		map[string]any{"metadata": map[string]any{"labels": labels}})
	return err
}

type objMeta struct {
	Name            string            `json:"name"`
	UID             string            `json:"uid"`
	Labels          map[string]string `json:"labels"`
	Annotations     map[string]string `json:"annotations"`
	OwnerReferences []struct {
		UID        string `json:"uid"`
		Controller *bool  `json:"controller"`
	} `json:"ownerReferences"`
}

func (a *kube) nodes() (map[string]objMeta, error) {
	b, _, err := a.do(http.MethodGet, "/api/v1/nodes", "", nil)
	if err != nil {
		return nil, err
	}
	var l struct {
		Items []struct {
			Metadata objMeta `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, err
	}
	out := map[string]objMeta{}
	for _, it := range l.Items {
		out[it.Metadata.Name] = it.Metadata
	}
	return out, nil
}

func nodeFeatureName(uid, node string) string {
	h := fnv.New64a()
	h.Write([]byte(uid))
	h.Write([]byte{0})
	h.Write([]byte(node))
	return fmt.Sprintf("gpustack-topology-%016x", h.Sum64())
}

func standardKey(k string) bool {
	p, _, ok := strings.Cut(k, "/")
	return ok && (p == "kubernetes.io" || p == "topology.kubernetes.io")
}

// applied: the Node carries exactly want as nfd-master's labels.
func applied(m objMeta, want map[string]string) bool {
	for k, v := range want {
		if m.Labels[k] != v {
			return false
		}
	}
	var owned []string
	if s := m.Annotations[featureLabels]; s != "" {
		owned = strings.Split(s, ",")
	}
	if len(owned) != len(want) {
		return false
	}
	for _, k := range owned {
		if _, ok := want[k]; !ok {
			return false
		}
	}
	return true
}

// throughNFD writes the NodeFeatures of snapshot (Node -> labels), deletes the stale ones,
// waits for nfd-master, writes the profiles. Returns the number of failures.
func (a *kube) throughNFD(source string, levels []string, snapshot map[string]map[string]string, wait time.Duration) int {
	b, _, err := a.do(http.MethodGet, "/apis/worker.gpustack.ai/v1/topologysources/"+source, "", nil)
	var ts struct {
		APIVersion string  `json:"apiVersion"`
		Metadata   objMeta `json:"metadata"`
	}
	if err == nil {
		err = json.Unmarshal(b, &ts)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "labeler: TopologySource %s: %v\n", source, err)
		return 1
	}
	uid := ts.Metadata.UID
	cluster, err := a.nodes()
	if err != nil {
		fmt.Fprintf(os.Stderr, "labeler: list Nodes: %v\n", err)
		return 1
	}
	desired := map[string]map[string]string{}
	for n, labels := range snapshot {
		m, ok := cluster[n]
		if !ok {
			fmt.Fprintf(os.Stderr, "labeler: node %s is described but not in the cluster: skipped\n", n)
			continue
		}
		pub := map[string]string{}
		for k, v := range labels {
			if standardKey(k) {
				if m.Labels[k] != v {
					fmt.Fprintf(os.Stderr, "labeler: standard label %q on Node %q must already equal %q\n", k, n, v)
					return 1
				}
				continue
			}
			pub[k] = v
		}
		if len(pub) > 0 {
			desired[n] = pub
		}
	}
	bad := 0
	// The source's NodeFeatures of Nodes no longer described (or with no private label).
	lb, _, err := a.do(http.MethodGet, nodeFeatures+"?labelSelector="+url.QueryEscape(sourceUIDLabel+"="+uid), "", nil)
	var existing struct {
		Items []struct {
			Metadata objMeta `json:"metadata"`
		} `json:"items"`
	}
	if err == nil {
		err = json.Unmarshal(lb, &existing)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "labeler: list NodeFeatures: %v\n", err)
		return 1
	}
	var dropped []string
	deleted := 0
	for _, it := range existing.Items {
		n := it.Metadata.Labels[nodeNameLabel]
		if _, ok := desired[n]; ok && it.Metadata.Name == nodeFeatureName(uid, n) {
			continue
		}
		if _, _, err := a.do(http.MethodDelete, nodeFeatures+"/"+it.Metadata.Name, "", nil); err != nil {
			fmt.Fprintf(os.Stderr, "labeler: delete NodeFeature %s: %v\n", it.Metadata.Name, err)
			bad++
			continue
		}
		deleted++
		if _, described := snapshot[n]; !described && n != "" {
			dropped = append(dropped, n)
		}
	}
	names := make([]string, 0, len(desired))
	for n := range desired {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		nf := map[string]any{
			"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
			"metadata": map[string]any{
				"name": nodeFeatureName(uid, n), "namespace": workerNamespace,
				"labels": map[string]string{nodeNameLabel: n, sourceUIDLabel: uid},
				"ownerReferences": []map[string]any{{"apiVersion": ts.APIVersion, "kind": "TopologySource",
					"name": source, "uid": uid, "controller": true}},
			},
			"spec": map[string]any{"labels": desired[n]},
		}
		// Server-side apply, one field manager: a label dropped from spec.labels leaves the object.
		path := nodeFeatures + "/" + nodeFeatureName(uid, n) + "?fieldManager=" + fieldManager + "&force=true"
		if _, _, err := a.do(http.MethodPatch, path, "application/apply-patch+yaml", nf); err != nil {
			fmt.Fprintf(os.Stderr, "labeler: write NodeFeature for node %s: %v\n", n, err)
			bad++
		}
	}
	if bad > 0 {
		return bad
	}
	// nfd-master applies them: every described Node carries exactly its labels, and the
	// dropped Nodes none.
	expect := map[string]map[string]string{}
	for n := range snapshot {
		if _, ok := cluster[n]; ok {
			expect[n] = desired[n]
		}
	}
	for _, n := range dropped {
		if _, ok := cluster[n]; ok {
			expect[n] = nil
		}
	}
	t0 := time.Now()
	deadline := t0.Add(wait)
	for {
		cluster, err = a.nodes()
		var lacking []string
		if err == nil {
			for n, want := range expect {
				if m, ok := cluster[n]; ok && !applied(m, want) {
					lacking = append(lacking, n)
				}
			}
		}
		if err == nil && len(lacking) == 0 {
			break
		}
		if time.Now().After(deadline) {
			sort.Strings(lacking)
			if err != nil {
				fmt.Fprintf(os.Stderr, "labeler: list Nodes: %v\n", err)
			}
			fmt.Fprintf(os.Stderr, "labeler: nfd-master did not apply the NodeFeatures within %s: %d Node(s) lack their labels: %s\n",
				wait, len(lacking), strings.Join(lacking, ", "))
			return 1
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "labeler: nfd-master applied %d NodeFeature(s) (%d deleted) in %d ms\n",
		len(desired), deleted, time.Since(t0).Milliseconds())
	// The profile, from the labels each Node now carries, on the Node itself.
	for n := range expect {
		id, _ := derive(levels, cluster[n].Labels)
		if cluster[n].Labels[profileLabel] == id {
			continue
		}
		if err := a.mergePatchNode(n, map[string]string{profileLabel: id}); err != nil {
			fmt.Fprintf(os.Stderr, "labeler: patch node %s: %v\n", n, err)
			bad++
		}
	}
	return bad
}
