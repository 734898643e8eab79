/// Why a packet is not a disco message we can read.
public enum DiscoError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No `TS💬` magic, or shorter than the 62-byte header.
    case notDisco
    /// The box did not open with our disco key (not for us, or tampered).
    case cannotOpen
    /// Too short for its type.
    case short
    case unknownType(UInt8)

    public var description: String {
        switch self {
        case .notDisco: "not a disco message"
        case .cannotOpen: "disco box does not open"
        case .short: "short disco message"
        case .unknownType(let type): "unknown disco message type \(type)"
        }
    }
}
