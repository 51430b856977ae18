package channel

import (
	"fmt"
	"sort"
)

// Registry holds the provider adapters a gateway delivers with, by the domain's channel
// name (inbox.ChannelEmail, "EMAIL", ...) and, where one channel has a provider per
// device platform (push: APNs and FCM), by platform. The delivery worker looks an
// adapter up by the record's channel and the claimed record's platform; a channel with
// no registration has no provider (its records are SKIPPED no_provider).
//
// Register everything before use; after that a Registry is safe for concurrent reads.
// The nil *Registry has no adapter.
type Registry struct {
	m map[route]Channel
}

// route is a registration's key: a channel, or a channel and a platform.
type route struct{ channel, platform string }

// Route names one registration (Routes).
type Route struct {
	// Channel is the channel's name; Platform the device platform ("" for every one).
	Channel, Platform string
	Adapter           Channel
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{m: map[route]Channel{}} }

// Register makes c the adapter of channelName for platform ("" for a channel whose
// messages do not depend on a platform) and returns r, so registrations chain. A nil c
// registers nothing (a provider left unconfigured). Registering one route twice panics,
// as http.ServeMux does for a pattern: a registration is code, not input.
func (r *Registry) Register(channelName, platform string, c Channel) *Registry {
	if c == nil {
		return r
	}
	k := route{channelName, platform}
	if _, dup := r.m[k]; dup {
		panic(fmt.Sprintf("channel: %s/%s registered twice", channelName, platform))
	}
	r.m[k] = c
	return r
}

// Lookup returns the adapter of channelName for platform: the platform's own, else the
// channel's for every platform; nil when there is none.
func (r *Registry) Lookup(channelName, platform string) Channel {
	if r == nil {
		return nil
	}
	if platform != "" {
		if c := r.m[route{channelName, platform}]; c != nil {
			return c
		}
	}
	return r.m[route{channelName, ""}]
}

// Has reports whether channelName has an adapter for some platform.
func (r *Registry) Has(channelName string) bool {
	if r == nil {
		return false
	}
	for k := range r.m {
		if k.channel == channelName {
			return true
		}
	}
	return false
}

// Routes returns every registration, sorted by channel and platform.
func (r *Registry) Routes() []Route {
	if r == nil {
		return nil
	}
	out := make([]Route, 0, len(r.m))
	for k, c := range r.m {
		out = append(out, Route{Channel: k.channel, Platform: k.platform, Adapter: c})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Channel != out[j].Channel {
			return out[i].Channel < out[j].Channel
		}
		return out[i].Platform < out[j].Platform
	})
	return out
}
