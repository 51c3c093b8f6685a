// Tilewright's stand-in for CANN's "acl/acl.h" (the ACL umbrella header). The real one also pulls
// in the operator and model APIs (acl_op.h, acl_mdl.h), which the printed host launcher does not
// use. Declarations only, for g++ -fsyntax-only.
#pragma once

#include "acl_base.h"
#include "acl_rt.h"
