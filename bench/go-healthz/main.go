// The reference's HTTP stack for `agent-bench http`: Go's net/http answering GET /healthz
// with the agent's bytes. Usage: go-healthz 127.0.0.1:PORT (loopback only).
package main

import (
	"net/http"
	"os"
	"strings"
)

func main() {
	addr := os.Args[1]
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		os.Exit(2)
	}
	body := []byte("{\"status\":\"ok\"}\n")
	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("Server", "workspace-agent")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	})
	if err := http.ListenAndServe(addr, nil); err != nil {
		os.Exit(1)
	}
}
