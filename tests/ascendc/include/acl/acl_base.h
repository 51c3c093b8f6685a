// Tilewright's stand-in for CANN's "acl/acl_base.h": the base types of the ACL runtime API that the
// printed host launcher and the ascendc_library-generated aclrtlaunch_<kernel>.h use. Written from
// the public ACL documentation (types, values); declarations only, for g++ -fsyntax-only.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifndef ACL_FUNC_VISIBILITY
#define ACL_FUNC_VISIBILITY
#endif

typedef void* aclrtStream;
typedef int aclError;

static const int ACL_SUCCESS = 0;
