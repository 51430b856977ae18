package metrics

import "github.com/prometheus/client_golang/prometheus"

// Delivery holds the delivery worker's metrics (package delivery reports through
// delivery.Options.OnConfigError; app/build.go connects the two). A nil *Delivery
// records nothing.
type Delivery struct {
	configErrors *prometheus.CounterVec // provider
}

// NewDelivery registers the delivery worker's metrics on r and returns them; call it
// once per Registry. A nil r gives a nil *Delivery.
func NewDelivery(r *Registry) *Delivery {
	if r == nil {
		return nil
	}
	m := &Delivery{configErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "delivery_config_errors_total",
		Help: "Sends a provider refused because of the gateway's own configuration (a revoked, invalid or " +
			"missing credential: Slack's invalid_auth, token_revoked...), by provider. Every one fails its record; " +
			"alert on any.",
	}, []string{"provider"})}
	r.reg.MustRegister(m.configErrors)
	return m
}

// ConfigError counts one send provider refused for the gateway's configuration.
func (m *Delivery) ConfigError(provider string) {
	if m == nil {
		return
	}
	m.configErrors.WithLabelValues(provider).Inc()
}
