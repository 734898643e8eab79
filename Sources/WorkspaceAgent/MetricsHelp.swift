/// The `# HELP` text of every metric family the agent exports (every family has
/// one). The modules count through swift-metrics, which carries no description; the
/// executable owns the Prometheus backend, so the catalog lives beside it. A family missing
/// here gets a generic line, and a test fails on it.
enum MetricsHelp {
    static let generic = "A WorkspaceAgent metric (no description yet)."

    static func text(for name: String) -> String { texts[name] ?? generic }

    static let texts: [String: String] = [
        // HTTP
        "http_server_request_duration_seconds":
            "Time from each request's head to its response head, by route (NotFound when none matches), method and status; a WebSocket route counts once its session ends, status 101, for the session's length.",
        "agent_http_connections": "Open HTTP connections.",
        "agent_ssh_sessions": "SSH sessions whose process is running (loopback listener and tailnet ports 1 and 22).",
        "agent_ssh_timeouts_total": "SSH connections closed by --ssh-max-timeout (unanswered keepalive for that long, or its absolute deadline below 3s).",
        "agent_ssh_connections": "Open SSH connections, by source (tailnet: ports 1 and 22; loopback: --ssh-address); each source has a cap of 256.",
        "agent_ssh_preauth_evicted_total":
            "SSH connections closed before authenticating to make room for a newcomer at their source's cap (the oldest unauthenticated first), by source.",
        "agent_ssh_connections_refused_total": "SSH connections refused at their source's cap with every open one authenticated, by source.",
        "agent_ssh_handshake_timeouts_total": "SSH connections closed for not completing the handshake (to authentication) within 60 s.",
        "agent_reconnecting_pty_connections_total": "Connections to the reconnecting PTY (tailnet port 2, the web terminal) served.",
        "agent_reconnecting_pty_sessions": "Reconnecting PTY sessions (a process on a terminal each, attached or not); at most 64.",
        "agent_reconnecting_pty_errors_total":
            "Reconnecting PTY screen backend failures, by error_type (screen_spawn, screen_wait, screen_quit).",
        "agent_speedtest_tests_total": "Speed tests started on tailnet port 3, by direction (the client's: download, upload).",
        "agent_speedtest_bytes_total": "Bytes the speed test wrote (download) or read (upload), by direction (the client's).",
        "agent_speedtest_refused_total":
            "Speed test connections refused: a bad request (answered with its error) or more than 8 tests at once.",
        "agent_http_connections_evicted_total": "Idle HTTP connections closed to make room for a new one.",
        "agent_http_connections_refused_total": "HTTP connections refused because every slot was busy.",
        "agent_http_connections_closed_total": "HTTP connections closed by the agent, by reason (write_stall, websocket_idle, invariant: an event the connection rules could not follow).",
        "agent_http_guard_responses_total": "Answers the connection guard gave itself, by status (400, 405, 408, 413, 414, 417, 431).",
        "agent_http_websockets": "WebSocket slots held (handshakes admitted and upgraded connections).",
        "agent_http_websockets_refused_total": "WebSocket handshakes refused (503) over the WebSockets' budget.",
        "agent_http_connections_handed_over_total":
            "Connections handed over by another module (the tailnet) and served by the HTTP API, by listener; they count in the other HTTP connection metrics too.",
        "agent_http_handovers_refused_total":
            "Handed-over connections refused before serving, by reason (not_serving, invalid_listener).",
        // Scripts and the per-session reports
        "agent_chat_context_resolves_total": "Chat context resolves (each is a new snapshot version).",
        "agent_chat_context_version": "The latest chat context snapshot's version (0 before the readiness gate opens).",
        "agent_chat_context_pushes_total": "PushContextState calls, by outcome (accepted, not_accepted, error, unimplemented).",
        "agent_mcp_tool_calls_total":
            "MCP tool calls through the agent, by outcome (ok, tool_error, failed, timeout, cancelled, busy, unknown_server, invalid_name).",
        "agent_mcp_tool_call_duration_seconds": "Time of each MCP tool call through the agent that reached a server.",
        "agent_mcp_servers": "Declared MCP servers, by state (connecting, connected, list_failed, restarting).",
        "agent_mcp_server_restarts_total": "MCP server sessions started again after a crash or a failed connect.",
        "agent_mcp_http_retries_total": "MCP HTTP requests sent again on a fresh connection after their connection closed before any answer.",
        "agent_mcp_http_requests_total": "MCP HTTP requests answered, by whether their connection was new or kept alive from an earlier request.",
        "agent_mcp_unsolicited_dropped_total": "Requests and notifications MCP servers sent past their rate, dropped unanswered.",
        "agent_mcp_buffer_refusals_total": "MCP server buffers the shared memory budget refused to grow (the session or send failed).",
        "agent_mcp_buffered_bytes": "Bytes the MCP servers' buffers hold (capacity), against the shared budget.",
        "agent_scripts_executed_total": "Script runs (start, stop, cron, on demand), by success (the reference's series).",
        "coderd_agentstats_startup_script_seconds": "How long the start phase took, by success (set once; the reference's series).",
        "agent_scripts_running": "Script runs going on now.",
        "agent_scripts_cron_skipped_total": "Cron ticks skipped because the script already had 4 runs going.",
        "agent_scripts_output_bytes_total": "Bytes the scripts wrote to stdout and stderr.",
        "agent_scripts_log_lines_total":
            "Script log lines by result: queued in the upload journal, sent, refused (the journal was full; the log file has them), rejected (by the control plane).",
        "agent_scripts_log_batches_total": "BatchCreateLogs requests the control plane acknowledged.",
        "agent_scripts_log_batches_refused_total": "BatchCreateLogs requests the control plane answered with an error (sent again after a wait).",
        "agent_scripts_completed_reports_total": "ScriptCompleted reports by result (sent, rejected by the control plane, refused by the full journal).",
        "agent_app_health_checks_total": "App health checks by result (healthy: a response below 500; failed).",
        "agent_app_health_reports_total": "BatchUpdateAppHealths calls by result (ok, error).",
        "agent_metadata_collections_total": "Metadata collections by result (ok, error: the result carries error text).",
        "agent_metadata_reports_total": "BatchUpdateMetadata calls by result (ok, error).",
        "agent_stats_reports_total": "UpdateStats calls by result (ok, error), the interval probe included.",
        "agent_stats_report_interval_seconds": "The stats report interval the control plane asked for.",
        "agent_resources_monitor_volume_reads_skipped_total":
            "Monitored volumes left out of a resource monitoring datapoint because statfs did not answer, by reason (timeout: no answer within the collection interval; stuck: an earlier statfs of the volume had not returned, so none was made; busy: too many statfs calls waiting).",
        "agent_resources_monitor_volume_reads_outstanding":
            "statfs calls of the resource monitor made and not returned (each holds a thread of its 4, or waits for one).",
        // Tailnet
        "agent_tailnet_peers": "WireGuard peers configured from the coordination stream.",
        "agent_tailnet_handshakes_total": "WireGuard handshakes completed (initiations answered and ours answered).",
        "agent_tailnet_derp_connects_total": "DERP relay connections established (the home region's and others).",
        "agent_tailnet_derp_disconnects_total": "DERP relay connections lost.",
        "agent_tailnet_packets_total": "Inner IP packets through the tunnel, by direction (in, out).",
        "agent_tailnet_bytes_total": "Bytes of inner IP packets through the tunnel, by direction (in, out).",
        "agent_tailnet_tsmp_pongs_total": "TSMP pings answered (coderd's reachability check).",
        "agent_tailnet_disco_pings_total": "Disco pings received over DERP (coder ping) and answered.",
        "agent_tailnet_dropped_total":
            "Tunnel packets dropped, by reason (no_session, replay, bad_mac, source_not_allowed, queue_full, unknown_key, malformed, no_route, authentication_failed, handshake_failed, handshake_timeout, handshake_rate_limited, no_relay, relay_queue_full, unverified_udp_source).",
        "agent_tailnet_path_bytes_total":
            "WireGuard bytes by the path they took (derp, direct) and direction (in, out); disco sent over DERP counts as DERP.",
        "agent_tailnet_path_switches_total": "Times a peer's path changed (DERP to direct and back, one direct address for another).",
        "agent_tailnet_disco_sent_total": "Disco messages of the direct paths sent, by type (ping, pong, call_me_maybe).",
        "agent_tailnet_disco_received_total": "Disco messages of the direct paths received, by type (pong, call_me_maybe).",
        "agent_tailnet_disco_dropped_total":
            "Disco messages dropped, by reason (unknown_sender: a key no peer holds; cannot_open: the box does not open; invalid: not valid where it came).",
        "agent_tailnet_stun_requests_total": "STUN binding requests sent to discover the agent's public endpoints.",
        "agent_tailnet_stun_replies_total": "STUN binding answers matched to a request sent.",
        "agent_tailnet_tcp_connections": "Open TCP connections through the tunnel (port 4 and forwarded ports).",
        "agent_tailnet_udp_flows": "Open UDP flows through the tunnel to the workspace's loopback.",
        "agent_tailnet_tcp_accepted_total": "TCP connections through the tunnel whose handshake completed (served and forwarded).",
        "agent_tailnet_tcp_forwarded_total": "Of the accepted tunnel TCP connections, those forwarded to 127.0.0.1.",
        "agent_tailnet_tcp_refused_total":
            "Tunnel SYNs refused, by reason (reserved_port, no_listener, connect_timeout, connection_limit, other: reset; half_open_limit: dropped).",
        "agent_tailnet_tcp_handshake_timeouts_total": "Tunnel TCP handshakes abandoned after 20 s without the final ACK.",
        "agent_tailnet_tcp_timeouts_total": "Tunnel TCP connections ended by a timeout, by kind (idle: reset; half_closed: closed).",
        "agent_tailnet_tcp_time_wait_reused_total": "TIME_WAIT connections ended early by a newer SYN on their 4-tuple (a peer reusing its port).",
        "agent_tailnet_tcp_challenge_acks_total":
            "SYNs on an open tunnel connection, by result (sent: answered with a challenge ACK; limited: dropped, one was sent less than 500 ms before).",
        "agent_tailnet_tcp_out_of_order_purges_total": "Times a tunnel connection's out-of-order segments went over their bound (64) and were dropped.",
        "agent_tailnet_tcp_bytes_total": "Payload bytes of tunnel TCP connections, by direction (in: from the peer to the workspace; out: back).",
        "agent_tailnet_stack_dropped_total":
            "Inner packets the tunnel's TCP/IP stack dropped (not for the agent, IPv4, unsupported, malformed, outside the window, over a bound).",
        "agent_tailnet_udp_flows_opened_total": "UDP flows through the tunnel opened (each a local socket).",
        "agent_tailnet_udp_flows_refused_total": "UDP datagrams dropped because they would have opened a flow beyond the bound (256).",
        "agent_tailnet_udp_idle_timeouts_total": "UDP flows through the tunnel ended by their idle timeout.",
        "agent_tailnet_udp_datagrams_total": "UDP datagrams through the tunnel, by direction (in: from the peer; out: back to it).",
        "agent_tailnet_udp_datagrams_dropped_total":
            "UDP datagrams through the tunnel dropped (malformed, forwarding off, port 0, over a flow's queue or write buffer, too large for the MTU).",
        "agent_derp_connects_total": "DERP connections that finished their handshake.",
        "agent_derp_reconnects_total": "DERP connections made after the first (reconnects).",
        "agent_derp_frames_sent_total": "DERP frames written.",
        "agent_derp_frames_received_total": "DERP frames read.",
        "agent_derp_bytes_sent_total": "Bytes of DERP frames written.",
        "agent_derp_bytes_received_total": "Bytes of DERP frames read.",
        "agent_derp_drops_total": "DERP packets dropped, by reason (queue_full, not_connected, too_large, inbound_full, closed, ...).",
        // Processes
        "agent_processes_started_total": "Processes started through the process API.",
        "agent_processes_exited_total": "Processes started through the process API that exited.",
        "agent_processes_running": "Processes whose shell is running.",
        "agent_process_output_bytes_total": "Bytes read from the processes' output.",
        "agent_stream_subscribers": "Live-output stream subscribers attached.",
        "agent_stream_omitted_bytes_total": "Output bytes not sent to slow stream subscribers (they get a gap marker).",
        "agent_stream_disconnected_total": "Stream subscribers the agent disconnected, by reason (stalled, close_timeout).",
        "agent_process_starts_replayed_total": "Starts answered with the process an earlier start of the same tool call made.",
        "agent_process_stdin_bytes_total": "Bytes written to processes' stdin (pipes and terminals).",
        "agent_process_stdin_refused_total": "Stdin writes refused, by reason (stalled, closed, busy, too_large, line_too_long, error).",
        "agent_process_awaits_total": "Output awaits that ended, by condition (matched, port_open, exited, timeout).",
        "agent_processes_restored_total": "Processes of an earlier agent restored from the state dir (lost ones included).",
        "agent_process_spool_written_bytes_total": "Output bytes written to the processes' spools on disk.",
        "agent_process_spool_dropped_bytes_total": "Spooled output dropped, oldest first, by reason (process_cap, total_cap, write_error).",
        "agent_process_spool_write_errors_total": "Failed writes to output spool files.",
        "agent_process_spool_bytes": "Bytes of process output on disk now.",
        "agent_process_durable_log_failures_total": "Failed writes of the process records or tool-call claims logs (rewritten whole at the next change).",
        "agent_process_durable_failure_logs_suppressed_total":
            "Failed writes of the process records, tool-call claims or spools not logged because one about the same file was logged less than 30 s before.",
        "agent_process_starts_unclaimed_total": "Tool-call starts refused (503) because their claim could not be written durably; nothing ran.",
        // Upward
        "agent_upward_items_queued": "Items waiting to go to the control plane, by outbox.",
        "agent_upward_items_dropped_total": "Items dropped because their outbox was full, by outbox.",
        "agent_upward_items_rejected_total": "Items the control plane refused, by outbox.",
        // Agent socket
        "agent_socket_connections": "Open agent-socket connections.",
        "agent_socket_calls_total": "Agent-socket calls served, by method.",
        "agent_socket_disconnected_total": "Agent-socket connections the agent closed, by reason.",
        // Files
        "agent_files_list_directory_reads_total": "Directories read whole by list-directory; later pages of a kept listing read nothing.",
        "agent_files_kept_listing_entries": "Entries held in the listings kept for list-directory's pages.",
        // Git watching
        "agent_git_watch_inotify_watches": "Directories watched with inotify, all repositories together.",
        "agent_git_watch_polled_repositories": "Repositories checked by polling (over the watch budget, or without inotify).",
        "agent_git_watch_inotify_overflows_total": "inotify queue overflows (every repository is rescanned and rewatched).",
        "agent_git_watch_checks_total": "Repository checks for watch sockets, by outcome.",
        "agent_git_watch_shared_reads_total": "Repository scans shared by several watchers of the same repository.",
        "agent_git_watch_file_changed_during_scan_total": "Scans retried because a file changed while it was read.",
        // Boundary logs
        "agent_boundary_log_proxy_batches_dropped_total": "Boundary log batches dropped, by reason (buffer_full, forward_failed, spool_full).",
        "agent_boundary_log_proxy_logs_dropped_total": "Boundary log entries dropped, by reason.",
        "agent_boundary_log_proxy_batches_received_total": "Boundary log batches read from boundary's connections.",
        "agent_boundary_log_proxy_batches_forwarded_total": "Boundary log batches the control plane acknowledged.",
        "agent_boundary_log_proxy_batches_logged_total": "Boundary log batches written to the agent's log (no control plane).",
        "agent_boundary_log_proxy_batches_queued": "Boundary log batches held in memory.",
        "agent_boundary_log_proxy_connections": "Open boundary connections.",
        "agent_boundary_log_proxy_disconnected_total": "Boundary connections the agent closed, by reason (evicted, partial_frame, idle).",
        "agent_boundary_log_proxy_framing_errors_total": "Boundary connections closed for a bad frame header.",
        "agent_boundary_log_proxy_frames_skipped_total":
            "Boundary frames read and skipped, by reason (undecodable: not the protobuf its tag says; empty: an envelope with neither logs nor status).",
        "agent_boundary_log_proxy_sequence_gaps_total": "Boundary sequence numbers skipped (logs boundary lost before sending).",
        "agent_boundary_log_proxy_sequence_duplicates_total": "Boundary sequence numbers repeated.",
        "agent_boundary_log_proxy_spool_batches_total": "Boundary log batches spooled to disk.",
        "agent_boundary_log_proxy_spool_bytes": "Size of the boundary log disk spool in bytes.",
        "agent_boundary_log_proxy_spool_corrupt_segments_total": "Torn boundary spool segments skipped.",
        // Desktop
        "agent_desktop_starts_total": "Desktops started.",
        "agent_desktop_crashes_total": "Desktops found dead when used.",
        "agent_desktop_viewers": "Open VNC viewers.",
        "agent_desktop_bridge_bytes_total": "Bytes the VNC bridge carried, by direction (to_viewer, to_desktop).",
        "agent_desktop_actions_total": "Desktop actions run, by action and outcome (ok, client_error, failed).",
        "agent_desktop_x_timeouts_total": "X server reads (screenshots, cursor_position) that got no answer within 10 seconds.",
        // The agent itself (ProcessMetrics, BuildInfoMetric)
        "process_cpu_seconds_total": "Total user and system CPU time the agent spent, in seconds.",
        "process_resident_memory_bytes": "The agent's resident memory size in bytes.",
        "process_virtual_memory_bytes": "The agent's virtual memory size in bytes.",
        "process_open_fds": "File descriptors the agent has open.",
        "process_max_fds": "The agent's limit on open file descriptors.",
        "process_start_time_seconds": "When the agent started, in seconds since the Unix epoch.",
        "workspace_agent_build_info": "Always 1; the labels say which build runs (version, commit).",
    ]
}
