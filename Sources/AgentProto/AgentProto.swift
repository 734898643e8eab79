// Generated messages live in *.pb.swift (`make proto`); this file holds the route names.

/// dRPC routes of the services the agent speaks.
public enum DRPCMethodPath {
    /// `/coder.agent.v2.Agent/<Method>`: the control plane's agent service.
    public static func agent(_ method: String) -> String { "/coder.agent.v2.Agent/" + method }
    /// `/coder.agentsocket.v1.AgentSocket/<Method>`: the local agent socket's service.
    public static func agentSocket(_ method: String) -> String { "/coder.agentsocket.v1.AgentSocket/" + method }
}
