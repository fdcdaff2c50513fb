package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The API group the consumer serves TopologySource in; both versions share one schema.
const group = "worker.gpustack.ai"

var versions = []string{"v1", "v1alpha1"}

// TopologySource is the consumer's cluster-scoped topology input, as its Go types
// declare it (durations as metav1.Duration: text that time.ParseDuration reads).
type TopologySource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              TopologySourceSpec `json:"spec"`
}

type TopologySourceSpec struct {
	NodeSelector          *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	Levels                []string              `json:"levels,omitempty"`
	AdditionalWritePrefix *string               `json:"additionalWritePrefix,omitempty"`
	NodeLabels            *NodeLabelsSource     `json:"nodeLabels,omitempty"`
	ConfigMap             *ConfigMapSource      `json:"configMap,omitempty"`
	Webhook               *WebhookSource        `json:"webhook,omitempty"`
}

type NodeLabelsSource struct{}

type ObjectReference struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

type ConfigMapSource struct {
	ConfigMapRef *ObjectReference `json:"configMapRef,omitempty"`
	Key          string           `json:"key"`
	MaxStaleness metav1.Duration  `json:"maxStaleness"`
}

type WebhookSource struct {
	URL                           string           `json:"url"`
	PollInterval                  metav1.Duration  `json:"pollInterval"`
	Timeout                       metav1.Duration  `json:"timeout"`
	MaxStaleness                  metav1.Duration  `json:"maxStaleness"`
	CABundleConfigMapRef          *ObjectReference `json:"caBundleConfigMapRef,omitempty"`
	BearerTokenSecretRef          *ObjectReference `json:"bearerTokenSecretRef,omitempty"`
	TLSClientCertificateSecretRef *ObjectReference `json:"tlsClientCertificateSecretRef,omitempty"`
}

type TopologySourceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TopologySource `json:"items"`
}

// AddToScheme registers both served versions, as a generated zz_generated register.go does.
func AddToScheme(s *runtime.Scheme) error {
	for _, v := range versions {
		gv := schema.GroupVersion{Group: group, Version: v}
		s.AddKnownTypes(gv, &TopologySource{}, &TopologySourceList{})
		metav1.AddToGroupVersion(s, gv)
	}
	return nil
}

// Deep copies, written out as controller-gen would generate them.

func copyRef(r *ObjectReference) *ObjectReference {
	if r == nil {
		return nil
	}
	c := *r
	return &c
}

func (in *TopologySourceSpec) DeepCopyInto(out *TopologySourceSpec) {
	*out = *in
	if in.NodeSelector != nil {
		out.NodeSelector = in.NodeSelector.DeepCopy()
	}
	if in.Levels != nil {
		out.Levels = append([]string(nil), in.Levels...)
	}
	if in.AdditionalWritePrefix != nil {
		p := *in.AdditionalWritePrefix
		out.AdditionalWritePrefix = &p
	}
	if in.NodeLabels != nil {
		out.NodeLabels = &NodeLabelsSource{}
	}
	if in.ConfigMap != nil {
		c := *in.ConfigMap
		c.ConfigMapRef = copyRef(in.ConfigMap.ConfigMapRef)
		out.ConfigMap = &c
	}
	if in.Webhook != nil {
		w := *in.Webhook
		w.CABundleConfigMapRef = copyRef(in.Webhook.CABundleConfigMapRef)
		w.BearerTokenSecretRef = copyRef(in.Webhook.BearerTokenSecretRef)
		w.TLSClientCertificateSecretRef = copyRef(in.Webhook.TLSClientCertificateSecretRef)
		out.Webhook = &w
	}
}

func (in *TopologySource) DeepCopyInto(out *TopologySource) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
}

func (in *TopologySource) DeepCopy() *TopologySource {
	if in == nil {
		return nil
	}
	out := new(TopologySource)
	in.DeepCopyInto(out)
	return out
}

func (in *TopologySource) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func (in *TopologySourceList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := &TopologySourceList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]TopologySource, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}
