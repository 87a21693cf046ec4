bash bmtrain_mgpu.sh
