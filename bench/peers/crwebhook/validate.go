package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

const (
	maxLevels     = 16
	hostnameLabel = "kubernetes.io/hostname"
)

// Domains a source may never write under (T6); the consumer's defaults.
var defaultReservedPrefixes = []string{
	"kubernetes.io", "k8s.io", "topology.gpustack.ai", "feature.gpustack.ai",
	"fabric.topograph.run", "accelerator.topograph.run",
}

// Query keys that suggest a credential in a URL (warning only).
var credentialQueryKeys = []string{"token", "access_token", "password", "passwd", "secret", "key", "apikey", "auth", "sig", "signature"}

// TopologySourceValidator implements admission.Validator[*TopologySource].
type TopologySourceValidator struct {
	WorkerNamespace  string
	ReservedPrefixes []string
}

var _ admission.Validator[*TopologySource] = &TopologySourceValidator{}

func (v *TopologySourceValidator) ValidateCreate(_ context.Context, obj *TopologySource) (admission.Warnings, error) {
	return v.validate(obj)
}

func (v *TopologySourceValidator) ValidateUpdate(_ context.Context, _, obj *TopologySource) (admission.Warnings, error) {
	return v.validate(obj)
}

func (v *TopologySourceValidator) ValidateDelete(context.Context, *TopologySource) (admission.Warnings, error) {
	return nil, nil
}

func (v *TopologySourceValidator) validate(obj *TopologySource) (admission.Warnings, error) {
	errs, warnings := v.validateSpec(&obj.Spec, field.NewPath("spec"))
	if len(errs) == 0 {
		return warnings, nil
	}
	gk := schema.GroupKind{Group: group, Kind: "TopologySource"}
	return warnings, apierrors.NewInvalid(gk, obj.Name, errs)
}

func (v *TopologySourceValidator) validateSpec(spec *TopologySourceSpec, p *field.Path) (field.ErrorList, admission.Warnings) {
	var errs field.ErrorList
	var warnings admission.Warnings

	// T1-T4: levels.
	lp := p.Child("levels")
	switch {
	case len(spec.Levels) == 0:
		errs = append(errs, field.Required(lp, "at least one level is needed"))
	case len(spec.Levels) > maxLevels:
		errs = append(errs, field.TooMany(lp, len(spec.Levels), maxLevels))
	}
	seen := make(map[string]struct{}, len(spec.Levels))
	for i, level := range spec.Levels {
		ip := lp.Index(i)
		for _, msg := range validation.IsQualifiedName(level) {
			errs = append(errs, field.Invalid(ip, level, msg))
		}
		if level == hostnameLabel {
			errs = append(errs, field.Forbidden(ip, hostnameLabel+" is always the last level and must not be listed"))
		}
		if _, dup := seen[level]; dup {
			errs = append(errs, field.Duplicate(ip, level))
		}
		seen[level] = struct{}{}
	}

	// T5: exactly one provider.
	providers := 0
	for _, set := range []bool{spec.NodeLabels != nil, spec.ConfigMap != nil, spec.Webhook != nil} {
		if set {
			providers++
		}
	}
	if providers == 0 {
		errs = append(errs, field.Required(p, "exactly one of nodeLabels, configMap, webhook is required"))
	} else if providers > 1 {
		errs = append(errs, field.Forbidden(p, "exactly one of nodeLabels, configMap, webhook may be set"))
	}

	// T6-T7: the write prefix.
	if spec.AdditionalWritePrefix != nil {
		wp := p.Child("additionalWritePrefix")
		prefix := *spec.AdditionalWritePrefix
		domain, ok := strings.CutSuffix(prefix, "/")
		if !ok || strings.Contains(domain, "/") {
			errs = append(errs, field.Invalid(wp, prefix, "must be a DNS subdomain followed by exactly one '/'"))
		} else if msgs := validation.IsDNS1123Subdomain(domain); len(msgs) > 0 {
			for _, msg := range msgs {
				errs = append(errs, field.Invalid(wp, prefix, msg))
			}
		} else {
			for _, r := range v.ReservedPrefixes {
				if domain == r || strings.HasSuffix(domain, "."+r) {
					errs = append(errs, field.Forbidden(wp, "the domain "+r+" is reserved"))
					break
				}
			}
		}
		if spec.NodeLabels != nil {
			errs = append(errs, field.Forbidden(wp, "a nodeLabels source is read-only"))
		}
		publishable := false
		for _, level := range spec.Levels {
			if strings.HasPrefix(level, "topology.gpustack.ai/") && level != "topology.gpustack.ai/profile" ||
				strings.HasPrefix(level, prefix) {
				publishable = true
				break
			}
		}
		if !publishable && len(spec.Levels) > 0 {
			warnings = append(warnings, "spec.levels: none of the levels is one this source may publish")
		}
	}

	// T8: configMap.
	if cm := spec.ConfigMap; cm != nil {
		cp := p.Child("configMap")
		errs = append(errs, v.validateRef(cm.ConfigMapRef, cp.Child("configMapRef"), true)...)
		if strings.TrimSpace(cm.Key) == "" {
			errs = append(errs, field.Required(cp.Child("key"), "must not be blank"))
		}
		if cm.MaxStaleness.Duration <= 0 {
			errs = append(errs, field.Invalid(cp.Child("maxStaleness"), cm.MaxStaleness.Duration.String(), "must be greater than zero"))
		}
	}

	// T9-T13: webhook.
	if wh := spec.Webhook; wh != nil {
		wp := p.Child("webhook")
		up := wp.Child("url")
		if u, err := url.Parse(wh.URL); err != nil {
			errs = append(errs, field.Invalid(up, wh.URL, err.Error()))
		} else {
			if !strings.EqualFold(u.Scheme, "https") {
				errs = append(errs, field.Invalid(up, wh.URL, "must be an absolute https URL"))
			}
			if u.Hostname() == "" {
				errs = append(errs, field.Invalid(up, wh.URL, "must name a host"))
			}
			if u.User != nil {
				errs = append(errs, field.Invalid(up, wh.URL, "must not carry user info"))
			}
			if u.Fragment != "" {
				errs = append(errs, field.Invalid(up, wh.URL, "must not have a fragment"))
			}
			for k := range u.Query() {
				for _, c := range credentialQueryKeys {
					if strings.EqualFold(k, c) {
						warnings = append(warnings, fmt.Sprintf("spec.webhook.url: the query parameter %q looks like a credential", k))
					}
				}
			}
		}
		for _, d := range []struct {
			name  string
			value metav1.Duration
		}{{"pollInterval", wh.PollInterval}, {"timeout", wh.Timeout}, {"maxStaleness", wh.MaxStaleness}} {
			if d.value.Duration <= 0 {
				errs = append(errs, field.Invalid(wp.Child(d.name), d.value.Duration.String(), "must be greater than zero"))
			}
		}
		if wh.Timeout.Duration > 0 && wh.PollInterval.Duration > 0 && wh.Timeout.Duration > wh.PollInterval.Duration {
			errs = append(errs, field.Invalid(wp.Child("timeout"), wh.Timeout.Duration.String(), "must not exceed pollInterval"))
		}
		if wh.MaxStaleness.Duration > 0 && wh.MaxStaleness.Duration < wh.PollInterval.Duration {
			warnings = append(warnings, "spec.webhook.maxStaleness is shorter than pollInterval")
		}
		if (wh.BearerTokenSecretRef == nil) == (wh.TLSClientCertificateSecretRef == nil) {
			errs = append(errs, field.Invalid(wp, "", "exactly one of bearerTokenSecretRef, tlsClientCertificateSecretRef is required"))
		}
		errs = append(errs, v.validateRef(wh.CABundleConfigMapRef, wp.Child("caBundleConfigMapRef"), false)...)
		errs = append(errs, v.validateRef(wh.BearerTokenSecretRef, wp.Child("bearerTokenSecretRef"), false)...)
		errs = append(errs, v.validateRef(wh.TLSClientCertificateSecretRef, wp.Child("tlsClientCertificateSecretRef"), false)...)
	}

	// T14.
	if spec.NodeSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(spec.NodeSelector,
			metav1validation.LabelSelectorValidationOptions{}, p.Child("nodeSelector"))...)
	}
	return errs, warnings
}

// T13: references stay in the worker namespace and name a valid object.
func (v *TopologySourceValidator) validateRef(r *ObjectReference, p *field.Path, required bool) field.ErrorList {
	if r == nil {
		if required {
			return field.ErrorList{field.Required(p, "")}
		}
		return nil
	}
	var errs field.ErrorList
	if r.Namespace != v.WorkerNamespace {
		errs = append(errs, field.Invalid(p.Child("namespace"), r.Namespace, "must be "+v.WorkerNamespace))
	}
	for _, msg := range validation.IsDNS1123Subdomain(r.Name) {
		errs = append(errs, field.Invalid(p.Child("name"), r.Name, msg))
	}
	return errs
}
