/// An Agent API version as the agent dials it (`version=major.minor`) and the control plane
/// accepts it; what a participant may send depends on it (2.11's `session_counts`).
public struct AgentAPIVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var major: Int
    public var minor: Int

    public init(_ major: Int, _ minor: Int) {
        self.major = major
        self.minor = minor
    }

    /// `Stats.session_counts` (the per-app map) replaces the four fixed session fields.
    public static let v2_11 = AgentAPIVersion(2, 11)
    /// The reference agent's version before 2.11 (PushContextState).
    public static let v2_10 = AgentAPIVersion(2, 10)
    /// The newest this agent speaks; it dials this first.
    public static let current = v2_11

    /// `major.minor`, as the dial's query carries it.
    public var description: String { "\(major).\(minor)" }

    public static func < (lhs: Self, rhs: Self) -> Bool { (lhs.major, lhs.minor) < (rhs.major, rhs.minor) }
}
