/// The agent socket's own byte-level code, for the fuzz targets (`Fuzz/`, `make fuzz`): the
/// frame tracker that tells a half-sent dRPC frame (``FrameTracker``). It exists for the
/// fuzz targets only; the service itself is public (``AgentSocketService``).
public enum AgentSocketFuzzing {
    /// Feeds `chunks` to a frame tracker, as the connection watch does, in bulk where it
    /// can; returns the kinds of the frames that began and whether one is still open.
    public static func trackFrames(_ chunks: [[UInt8]]) -> (kinds: [UInt8], midFrame: Bool) {
        var tracker = FrameTracker()
        var kinds: [UInt8] = []
        for chunk in chunks {
            tracker.feed(count: chunk.count, bytes: chunk) { kinds.append($0) }
        }
        return (kinds, tracker.isMidFrame)
    }
}
