import NIOCore
import Synchronization

/// The frames a session delivered and its route has not read yet: one producer (the
/// session's reader of the channel) and one consumer (the route's iterator).
///
/// Bounded: once ``maxFrames`` frames or ``maxBytes`` bytes are held the producer waits
/// for the route to read, so the session stops reading the channel and NIO's back pressure
/// stops reading the socket. At most ``maxFrames`` frames, and under ``maxBytes`` plus one
/// frame (a frame is at most ``WebSocketLimits/maxFrameBytes``).
final class WebSocketInboundBuffer: Sendable {
    /// Most frames held for a route that does not read.
    static let maxFrames = 8
    /// Bytes held beyond which the session stops reading the channel.
    static let maxBytes = 1 << 16

    private struct State {
        var frames = CircularBuffer<WebSocketDataFrame>(initialCapacity: 4)
        var bytes = 0
        var finished = false
        var consumer: CheckedContinuation<WebSocketDataFrame?, Never>?
        var producer: CheckedContinuation<Void, Never>?

        var isFull: Bool { frames.count >= WebSocketInboundBuffer.maxFrames || bytes >= WebSocketInboundBuffer.maxBytes }
    }

    private let state = Mutex(State())

    /// What is held now (for tests and the fuzz target).
    var held: (frames: Int, bytes: Int) { state.withLock { ($0.frames.count, $0.bytes) } }

    /// Adds `frame` (dropped once finished), then waits while the buffer is full, until
    /// the route reads, the buffer is finished, or the task is cancelled.
    func push(_ frame: WebSocketDataFrame) async {
        let consumer: CheckedContinuation<WebSocketDataFrame?, Never>? = state.withLock { state in
            guard !state.finished else { return nil }
            if let consumer = state.consumer {
                state.consumer = nil
                return consumer
            }
            state.frames.append(frame)
            state.bytes += frame.data.readableBytes
            return nil
        }
        if let consumer {
            consumer.resume(returning: frame)
            return
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let wait = state.withLock { state in
                    guard state.isFull, !state.finished, !Task.isCancelled else { return false }
                    state.producer = continuation
                    return true
                }
                if !wait { continuation.resume() }
            }
        } onCancel: {
            state.withLock { state in
                defer { state.producer = nil }
                return state.producer
            }?.resume()
        }
    }

    /// The next frame, or nil once finished and read to the end (or the task is cancelled).
    func next() async -> WebSocketDataFrame? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<WebSocketDataFrame?, Never>) in
                let (frame, ready, producer) = state.withLock {
                    state -> (WebSocketDataFrame?, Bool, CheckedContinuation<Void, Never>?) in
                    if let frame = state.frames.popFirst() {
                        state.bytes -= frame.data.readableBytes
                        let producer = state.isFull ? nil : state.producer
                        if producer != nil { state.producer = nil }
                        return (frame, true, producer)
                    }
                    if state.finished || Task.isCancelled { return (nil, true, nil) }
                    state.consumer = continuation
                    return (nil, false, nil)
                }
                producer?.resume()
                if ready { continuation.resume(returning: frame) }
            }
        } onCancel: {
            state.withLock { state in
                defer { state.consumer = nil }
                return state.consumer
            }?.resume(returning: nil)
        }
    }

    /// No more frames: the route reads what is held, then the end; a waiting producer goes on.
    func finish() {
        let (consumer, producer) = state.withLock { state in
            state.finished = true
            defer {
                state.consumer = nil
                state.producer = nil
            }
            return (state.consumer, state.producer)
        }
        consumer?.resume(returning: nil)
        producer?.resume()
    }
}
