/*
 * hostccl: AscendCL entry header (the host runtime, docs/runtime.md). CANN's acl.h also includes
 * the model and operator headers, which a host does not provide.
 */
#ifndef INC_EXTERNAL_ACL_ACL_H_
#define INC_EXTERNAL_ACL_ACL_H_

#include <acl/acl_base.h>
#include <acl/acl_rt.h>

#endif /* INC_EXTERNAL_ACL_ACL_H_ */
