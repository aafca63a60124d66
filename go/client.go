package rlock

/*
#include <stdlib.h>
#include "rlock.h"
*/
import "C"

import (
	"context"
	"runtime"
	"sync"
	"unsafe"
)

// Client is a connection to one Redis deployment, shared by the locks made
// from it; safe for concurrent use. Close it when done: locks still held
// then count as lost and are released.
type Client struct {
	handle    C.uint64_t
	closeOnce sync.Once
	closeErr  error
}

// ClientOption sets how Connect connects.
type ClientOption func(*clientConfig)

type clientConfig struct {
	urls    []string
	prefix  string
	cluster bool
	tlsCA   []byte
}

// WithURLs adds URLs to Connect's: the masters of a Redlock (the lock is
// held on a majority of them), or with WithCluster the seeds of one Cluster.
func WithURLs(urls ...string) ClientOption {
	return func(c *clientConfig) { c.urls = append(c.urls, urls...) }
}

// WithCluster: the URLs are seed nodes of one Redis Cluster.
func WithCluster() ClientOption {
	return func(c *clientConfig) { c.cluster = true }
}

// WithPrefix sets the key prefix (keys are PREFIX:{NAME}; default rlock).
func WithPrefix(prefix string) ClientOption {
	return func(c *clientConfig) { c.prefix = prefix }
}

// WithTLSCA trusts the CA of this PEM for rediss:// servers.
func WithTLSCA(pem []byte) ClientOption {
	return func(c *clientConfig) { c.tlsCA = pem }
}

// Connect connects to url (redis://, rediss://, redis+sentinel://; "" is
// $REDIS_URL, else redis://127.0.0.1:6379), the same URLs as every other
// face. It returns ctx's error if ctx is done first.
func Connect(ctx context.Context, url string, opts ...ClientOption) (*Client, error) {
	if err := checkContext(ctx, ""); err != nil {
		return nil, err
	}
	var cfg clientConfig
	if url != "" {
		cfg.urls = append(cfg.urls, url)
	}
	for _, o := range opts {
		o(&cfg)
	}
	urls := make([]C.RlockStr, len(cfg.urls))
	for i, u := range cfg.urls {
		urls[i] = cString(u)
	}
	options := (*C.RlockClientOptions)(C.calloc(1, C.size_t(unsafe.Sizeof(C.RlockClientOptions{}))))
	options.prefix = cString(cfg.prefix)
	options.cluster = C.bool(cfg.cluster)
	options.tls_ca_pem = cString(string(cfg.tlsCA))
	options.face = cString(runtime.Version())
	defer func() {
		for _, u := range urls {
			freeString(u)
		}
		freeString(options.prefix)
		freeString(options.tls_ca_pem)
		freeString(options.face)
		C.free(unsafe.Pointer(options))
	}()
	var first *C.RlockStr
	if len(urls) > 0 {
		// The array itself is C memory: it holds C pointers only.
		array := (*C.RlockStr)(C.calloc(C.size_t(len(urls)), C.size_t(unsafe.Sizeof(C.RlockStr{}))))
		defer C.free(unsafe.Pointer(array))
		copy(unsafe.Slice(array, len(urls)), urls)
		first = array
	}
	token, done := request()
	if call(func() C.int32_t { return C.rlock_connect(first, C.size_t(len(urls)), options, token) }) != C.RLOCK_OK {
		forget(token)
		return nil, errNotStarted
	}
	select {
	case o := <-done:
		return connected(o)
	case <-ctx.Done():
		// The connection may still come: close it then.
		go func() {
			if c, err := connected(<-done); err == nil {
				c.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

func connected(o outcome) (*Client, error) {
	if o.code != codeOK {
		return nil, failure("", o)
	}
	c := &Client{handle: C.uint64_t(o.value)}
	// The handle outlives Close (its locks' operations then fail as
	// closed): freed once nothing refers to the client, which closes it
	// without waiting for its releases (a finalizer must not block).
	runtime.SetFinalizer(c, func(c *Client) { C.rlock_client_free(c.handle) })
	return c, nil
}

// Close closes the client: every lock still held counts as lost (its
// holder told: Lost is closed), each is released best effort, and every
// later operation fails with ErrClosed. It returns once those releases are
// done (at most about 2 s). Closing again does nothing.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		token, done := request()
		if call(func() C.int32_t { return C.rlock_client_close(c.handle, token) }) != C.RLOCK_OK {
			forget(token)
		} else if o := <-done; o.code != codeOK {
			c.closeErr = failure("", o)
		}
	})
	runtime.KeepAlive(c)
	return c.closeErr
}
