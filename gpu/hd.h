// The host+device marker lives in model/hd.h, beside the stamp functions that need it; the
// kernel headers include it under this name, which stays so they need not change.
#pragma once

#include "model/hd.h"
