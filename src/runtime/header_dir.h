// The CPU runtime headers that generated kernels include (tw_cpu/*.h), materialised on disk
// from the copies embedded in the library, and verified before every compile.
#pragma once

#include <string>

namespace tw::runtime {

// sha256 of the embedded headers (paths and contents); part of every CPU cache key.
const std::string& embedded_headers_hash();

// Returns <root>/include/<hash of the embedded headers>/, a directory holding exactly the
// embedded headers. Before returning, checks that the directory and everything in it belong to
// this user, are not writable by group/others, are plain directories/files (no links), and
// that the files are exactly the embedded ones, byte for byte: a file planted there (e.g. a
// `vector` that would shadow the standard header) or a modified header would otherwise be
// compiled into the next kernel. A directory that fails the check is removed and written
// afresh; `root` itself must pass ensure_private_dir. Throws std::runtime_error when the
// directory cannot be written or removed (the message names the path and how to fix it).
std::string verified_header_dir(const std::string& root);

}  // namespace tw::runtime
