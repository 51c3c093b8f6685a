// SHA-256 (FIPS 180-4): kernel cache keys, artefact checksums, TW_DUMP_IR folder names.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tw::support {

// Incremental SHA-256 (FIPS 180-4).
class Sha256 {
public:
    Sha256();
    void update(const void* data, size_t len);
    void update(std::string_view s) { update(s.data(), s.size()); }
    std::string hex_digest();  // finalises; call once

private:
    void block(const unsigned char* p);
    uint32_t h_[8];
    unsigned char buf_[64];
    size_t buf_len_ = 0;
    uint64_t total_ = 0;
};

std::string sha256_hex(std::string_view data);
// sha256 of a file's contents; throws std::runtime_error if it cannot be read.
std::string sha256_file_hex(const std::string& path);
// The same for an open file (read from offset 0 with pread; `path` names it in messages).
std::string sha256_fd_hex(int fd, const std::string& path);

}  // namespace tw::support
