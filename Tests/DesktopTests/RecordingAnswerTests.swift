import AgentCore
import Foundation
import Testing

@testable import Desktop

/// A stopped recording's answer owns its set-aside files: they go once it is written, and
/// also when it is released unwritten (its client went away during the stop's wait). Before,
/// only writing the body deleted them, so a client that hung up left up to 100 MB behind.
struct RecordingAnswerTests {
    @Test func anAnswerReleasedUnwrittenDeletesItsFiles() throws {
        let directory = NSTemporaryDirectory() + "recording-answer-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = directory + "/v.mp4.sent-1"
        let thumbnail = directory + "/t.jpg.sent-1"
        #expect(FileManager.default.createFile(atPath: video, contents: Data(repeating: 1, count: 100)))
        #expect(FileManager.default.createFile(atPath: thumbnail, contents: Data(repeating: 2, count: 10)))
        do {
            let answer = Recorder.multipart(video: (video, 100), thumbnail: (thumbnail, 10))
            withExtendedLifetime(answer) {
                #expect(FileManager.default.fileExists(atPath: video), "kept while the answer may still be written")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: video) && !FileManager.default.fileExists(atPath: thumbnail))
    }

    /// An answer still held at shutdown removes the recordings' directory once its files go
    /// (the recorder's own removal at shutdown found them still there).
    @Test func anAnswerHeldAtShutdownRemovesTheDirectoryAfterItsFiles() throws {
        let directory = NSTemporaryDirectory() + "recording-answer-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = directory + "/v.mp4.sent-1"
        #expect(FileManager.default.createFile(atPath: video, contents: Data(repeating: 1, count: 100)))
        let mark = OnceFlag()
        do {
            let answer = Recorder.multipart(video: (video, 100), thumbnail: nil) {
                if mark.isSet { _ = rmdir(directory) }
            }
            withExtendedLifetime(answer) {
                #expect(rmdir(directory) != 0, "the recorder's own removal finds the file")
                mark.set()
            }
        }
        #expect(!FileManager.default.fileExists(atPath: directory), "removed after the answer's files")
    }
}
