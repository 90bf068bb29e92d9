package main

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/internal/amqpaddr"
	"github.com/olp-edu/borda/webhook/queueguard"
	"github.com/olp-edu/borda/webhook/topology"
)

// queueGuard builds the guard of top's forward queue, events queue and
// DLQ from amqp.management_url (nil, nil when it is unset): the vhost is
// the first amqp.url's, and so are the credentials when the management
// URL has none (amqp091's guest:guest when neither has). Errors name
// fields, never a URL.
func queueGuard(cfg configs.Config, top topology.Topology, logger *slog.Logger) (*queueguard.Guard, error) {
	raw := cfg.AMQP.ManagementURL.Reveal()
	if raw == "" {
		return nil, nil
	}
	mgmt, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("amqp.management_url does not parse as a URL")
	}
	vhost, user := "/", url.UserPassword("guest", "guest")
	if fields := amqpaddr.Fields(cfg.AMQP.URL.Reveal()); len(fields) > 0 {
		if u, err := url.Parse(strings.TrimSpace(fields[0])); err == nil {
			if v := strings.TrimPrefix(u.Path, "/"); v != "" {
				vhost = v // url.Parse unescaped it ("%2F" is "/")
			}
			if u.User != nil {
				user = u.User
			}
		}
	}
	if mgmt.User == nil {
		mgmt.User = user
	}
	queues := []queueguard.Queue{{Name: top.ForwardQueue, Routes: []queueguard.Route{{Exchange: top.Exchange, Binding: top.RoutingKey}}}}
	if top.EventsQueue != "" {
		queues = append(queues, queueguard.Queue{Name: top.EventsQueue, Routes: []queueguard.Route{{Exchange: top.Exchange, Binding: top.EffectiveEventsBinding()}}})
	}
	queues = append(queues, queueguard.Queue{Name: top.DLQ, Routes: []queueguard.Route{{Exchange: top.DLXExchange, Binding: top.DLQRoutingKey()}}})
	g, err := queueguard.New(queueguard.Options{ManagementURL: mgmt.String(), Vhost: vhost, Queues: queues, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("amqp.management_url: %w", err)
	}
	return g, nil
}
