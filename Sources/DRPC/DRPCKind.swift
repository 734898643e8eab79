/// dRPC packet kinds. The raw value sits in bits 6..1 of the control byte.
public enum DRPCKind: UInt8, Sendable, CaseIterable {
    case invoke = 1
    case message = 2
    case error = 3
    case cancel = 4
    case close = 5
    case closeSend = 6
    case invokeMetadata = 7
}
