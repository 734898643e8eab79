/// The partial-frame rule of the agent's local listeners (the agent socket, the boundary
/// socket): a connection that began a frame must finish it within the listener's timeout of
/// the frame's first byte, so a client that trickles a byte now and then cannot hold a slot.
/// Sans-IO: each read reports whether the stream is now mid-frame, and the listener's
/// handler arms or cancels its one timer as told.
public struct PartialFrameDeadline: Sendable {
    public enum Action: Sendable, Equatable {
        case none
        /// A frame began: arm the timer, replacing one armed before (it closes the
        /// connection when it fires).
        case arm
        /// The frame ended: cancel the timer.
        case cancel
    }

    /// True from a frame's first byte to its last.
    public private(set) var isMidFrame = false

    public init() {}

    /// After a read: `midFrame` is whether the bytes so far end inside a frame,
    /// `endedAFrame` whether the read completed one. A read that ends one frame and begins the
    /// next re-arms the timer: each frame has its own deadline, so a busy client whose reads
    /// keep ending mid-frame is not cut off.
    public mutating func afterRead(midFrame: Bool, endedAFrame: Bool = false) -> Action {
        switch (isMidFrame, midFrame) {
        case (false, true):
            isMidFrame = true
            return .arm
        case (true, false):
            isMidFrame = false
            return .cancel
        case (true, true) where endedAFrame:
            return .arm
        default:
            return .none
        }
    }
}
