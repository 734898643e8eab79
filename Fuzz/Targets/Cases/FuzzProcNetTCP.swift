import AgentSystem

/// The `/proc/net/tcp` and `tcp6` reader of the listening-ports route (AgentSystem's
/// ProcNetTCP): any bytes give a list or nothing, never a trap; every row it keeps is one
/// of the input's lines read alone, and it never keeps more rows than the input has lines.
public func fuzzProcNetTCP(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let bytes = input.rest()
    let listeners = ProcNetTCP.listeners(bytes)
    let lines = bytes.split(separator: UInt8(ascii: "\n")).count
    require(listeners.count <= lines, "\(listeners.count) listeners from \(lines) lines")
    // Each line is read on its own: the table read line by line gives the same rows.
    let byLine = bytes.split(separator: UInt8(ascii: "\n")).flatMap { ProcNetTCP.listeners(Array($0)) }
    require(byLine == listeners, "rows depend on their neighbours")
    // Rows in any state (the forwarded ports' owners): as many as lines at most, and the
    // listeners are exactly those in the LISTEN state.
    let sockets = ProcNetTCP.sockets(bytes)
    require(sockets.count <= lines, "\(sockets.count) rows from \(lines) lines")
    let listening = sockets.filter { $0.state == ProcNetTCP.listenState }.map { ProcNetTCP.Listener(port: $0.port, inode: $0.inode) }
    require(listening == listeners, "listeners are not the LISTEN rows")
    return 0
}
