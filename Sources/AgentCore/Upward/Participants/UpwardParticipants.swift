import Synchronization

/// The participants the control-plane session starts on each connected session: the host
/// registers every module's ``AgentModule/upwardParticipants`` here, and the session reads
/// the list each time it connects (one added while a session is up starts with the next).
///
/// Memory: at most ``maxParticipants`` entries (they come from the agent's modules, a fixed
/// handful; going past it is a programming error).
public final class UpwardParticipants: Sendable {
    /// Most participants the agent may register.
    public static let maxParticipants = 64

    private let participants = Mutex<[any UpwardParticipant]>([])

    /// A registry holding `initial` (tests; the host starts empty and adds modules' ones).
    public init(_ initial: [any UpwardParticipant] = []) {
        for participant in initial { add(participant) }
    }

    /// Registers `participant` (started with the next connected session).
    public func add(_ participant: any UpwardParticipant) {
        participants.withLock { list in
            precondition(list.count < Self.maxParticipants, "more than \(Self.maxParticipants) upward participants")
            list.append(participant)
        }
    }

    /// Every participant, in the order added.
    public var all: [any UpwardParticipant] { participants.withLock { $0 } }
}
