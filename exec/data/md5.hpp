// md5_hex: the MD5 digest (RFC 1321) of a byte string as 32 lowercase hex digits. Used only to
// name cached dataset indices the way Megatron-LM does (hashlib.md5 of the description), never
// for security.
#pragma once

#include <string>
#include <string_view>

namespace mplan::exec {

std::string md5_hex(std::string_view data);

}  // namespace mplan::exec
